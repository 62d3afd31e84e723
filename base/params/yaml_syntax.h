// A YAML syntax error located at the mistake, not where the parser noticed it.
//
//   catch (const YAML::ParserException& e) {
//     throw yaml_syntax_error(text, path, e.mark.line, e.mark.column, e.msg);
//   }
//
// yaml-cpp stops at the first place it cannot go on and names that place with a terse message ("illegal map
// value"). For the common mistakes that place is after the mistake, so the error is located and worded again:
//  - a tab in the indentation of a line up to the parser's stop (YAML indents with spaces only): that line;
//  - a key without its ':' ("workload" above "  model: mlp"): the parser reads both lines as one text and stops at
//    the next line's ':'; the error names the line without the colon;
//  - a line indented under a key that already has a value ("model: mlp" above "   layers: 2"): that line;
//  - a second ': ' on one line ("model: mlp: x"): that colon.
// Other errors keep the parser's place and words. Lines and columns are 1-based in the Error, 0-based here.
#pragma once

#include <string>

#include "base/error.h"

namespace podsim {

Error yaml_syntax_error(const std::string& text, const std::string& file, int mark_line, int mark_column,
                        const std::string& parser_message);

}  // namespace podsim
