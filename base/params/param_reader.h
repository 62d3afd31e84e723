// The experiment loader's reader (sim/config/loader.cpp): reads an experiment's parameters against the schema,
// collecting every error instead of stopping at the first, so a file's errors are reported in one pass, most specific
// first. A misspelled key is reported where it is written, with the nearest valid key; a required key that a
// misspelling points at is then not also reported as missing.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/params/param_yaml.h"
#include "base/params/schema.h"

namespace podsim {

struct ParamReader {
  Schema schema;
  ParamSet values;
  std::map<std::string, SourceLocation> group_where;  // where each mapping (section) was written
  std::vector<Error> errors;
  std::set<std::string> suggested;  // full paths that unknown-key errors suggested
  std::set<std::string> given;      // parameters written, valid or not
  // Groups whose parameters are unknown because their selector failed, with the keys some workload or strategy
  // declares there: those are not reported; another key is reported only if it is close to a valid one.
  std::map<std::string, std::set<std::string>> lenient;

  void fail(Error e) { errors.push_back(std::move(e)); }

  struct Entry {
    std::string key;
    YAML::Node value;
    SourceLocation where;  // of the key
  };
  // The entries of a mapping whose keys are unique plain scalars, in order; a duplicate or a non-scalar key is an
  // error and skipped, a node that is no mapping an error and no entries.
  std::vector<Entry> entries(const YAML::Node& node, const std::string& src, const std::string& path);

  void unknown_key(const std::string& prefix, const std::string& key, const SourceLocation& where);

  // Reads the parameters under `prefix` from `node` (of file `src`); `skip`: parameters already read.
  void walk(const YAML::Node& node, const std::string& prefix, const std::string& src,
            const std::set<std::string>& skip = {});

  // Throws the errors found, most specific first: unknown keys and bad values in the order of their files and
  // positions, then missing keys (located only at their section).
  void throw_if_failed() const;
};

}  // namespace podsim
