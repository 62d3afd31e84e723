// An append-only list for a chip's logs (hw/chip/chip_log.h): records go into blocks of fixed size, so a list of
// millions (the HBM accesses of a large imported module) grows without moving what it holds. A std::vector that
// doubles copies its records each time and holds the old and the new array at once; past glibc's mmap threshold
// each new array is fresh memory the kernel clears on first touch.
//
//   LogList<Interval> l;  l.push_back(x);  for (const Interval& i : l) ...;   // in the order pushed
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <vector>

namespace podsim {

template <class T>
class LogList {
 public:
  static constexpr size_t kBlock = 16384;

  void push_back(const T& x) {
    if (m_size % kBlock == 0) {
      m_blocks.emplace_back();
      m_blocks.back().reserve(kBlock);
    }
    m_blocks.back().push_back(x);
    ++m_size;
  }
  size_t size() const { return m_size; }
  bool empty() const { return m_size == 0; }
  const T& operator[](size_t i) const { return m_blocks[i / kBlock][i % kBlock]; }
  const T& back() const { return m_blocks.back().back(); }
  void clear() {
    m_blocks.clear();
    m_size = 0;
  }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;
    const_iterator(const LogList* l, size_t i) : m_list(l), m_i(i) {}
    reference operator*() const { return (*m_list)[m_i]; }
    pointer operator->() const { return &(*m_list)[m_i]; }
    const_iterator& operator++() {
      ++m_i;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return m_i == o.m_i; }
    bool operator!=(const const_iterator& o) const { return m_i != o.m_i; }

   private:
    const LogList* m_list;
    size_t m_i;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, m_size}; }

 private:
  std::vector<std::vector<T>> m_blocks;
  size_t m_size = 0;
};

}  // namespace podsim
