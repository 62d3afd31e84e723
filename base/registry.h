// A name -> factory registry that plugins join from their own translation unit, so that adding a workload,
// strategy or collective algorithm touches no other file:
//
//   PODSIM_REGISTER(IStrategy, DataParallel, "data_parallel", "Replicate weights, shard batch, all-reduce grads");
//
// Registration runs during static initialisation. Plugin folders are built into a shared library, so the linker
// cannot drop a translation unit that nothing references.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace podsim {

template <class Interface>
class Registry {
 public:
  struct Entry {
    std::string name;
    std::string description;
    std::function<std::unique_ptr<Interface>()> make;
  };

  static Registry& instance() {
    static Registry r;
    return r;
  }

  bool add(std::string name, std::string description, std::function<std::unique_ptr<Interface>()> make) {
    m_entries[name] = Entry{name, std::move(description), std::move(make)};
    return true;
  }

  const Entry* find(const std::string& name) const {
    auto it = m_entries.find(name);
    return it == m_entries.end() ? nullptr : &it->second;
  }

  std::unique_ptr<Interface> make(const std::string& name) const {
    const Entry* e = find(name);
    return e ? e->make() : nullptr;
  }

  // Sorted by name, so listings and docs are stable.
  std::vector<const Entry*> entries() const {
    std::vector<const Entry*> out;
    for (const auto& [k, v] : m_entries) out.push_back(&v);
    return out;
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : m_entries) out.push_back(k);
    return out;
  }

 private:
  std::map<std::string, Entry> m_entries;
};

}  // namespace podsim

#define PODSIM_REGISTER_CAT2(a, b) a##b
#define PODSIM_REGISTER_CAT(a, b) PODSIM_REGISTER_CAT2(a, b)
#define PODSIM_REGISTER(Interface, Impl, name, description)                                              \
  [[maybe_unused]] static const bool PODSIM_REGISTER_CAT(podsim_registered_, __LINE__) =                \
      ::podsim::Registry<Interface>::instance().add(name, description,                                  \
                                                    [] { return std::unique_ptr<Interface>(new Impl()); })
