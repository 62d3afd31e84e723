#include "sim/common/npy.h"

#include <cstring>
#include <fstream>

#include "sim/common/error.h"

namespace podsim {

std::string npy_bytes(const std::vector<int64_t>& shape, const std::vector<float>& data, bool as_int32) {
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";  // numpy writes a 1-tuple as (n,)
  std::string dict = std::string("{'descr': '") + (as_int32 ? "<i4" : "<f4") +
                     "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Header length pads magic (6) + version (2) + length (2) + dict + '\n' to a multiple of 64.
  size_t total = 10 + dict.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  dict.append(pad, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  uint16_t len = static_cast<uint16_t>(dict.size());
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>(len >> 8);
  out += dict;
  size_t off = out.size();
  out.resize(off + data.size() * 4);
  if (as_int32) {
    for (size_t i = 0; i < data.size(); ++i) {
      int32_t v = static_cast<int32_t>(data[i]);
      std::memcpy(&out[off + 4 * i], &v, 4);
    }
  } else if (!data.empty()) {
    std::memcpy(&out[off], data.data(), data.size() * 4);
  }
  return out;
}

void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& data,
               bool as_int32) {
  std::ofstream f(path, std::ios::binary);
  std::string bytes = npy_bytes(shape, data, as_int32);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!f) {
    SourceLocation w;
    w.file = path;
    throw Error(Err::OutputUnwritable, w, "cannot write tensor file '" + path + "'");
  }
}

}  // namespace podsim
