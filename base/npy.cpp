#include "base/npy.h"

#include <cctype>
#include <cstring>
#include <iterator>
#include <fstream>

#include "base/error.h"

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

void read_npy(const std::string& path, std::vector<int64_t>& shape, std::vector<float>& data) {
  SourceLocation w;
  w.file = path;
  auto bad = [&](const std::string& why) -> void {
    throw Error(Err::FileUnreadable, w, "cannot read tensor file '" + path + "': " + why);
  };
  std::ifstream f(path, std::ios::binary);
  if (!f) bad("no such file or not readable");
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) bad("not an .npy file");
  const int major = static_cast<unsigned char>(bytes[6]);
  size_t len = 0, off = 0;
  if (major == 1) {
    len = static_cast<unsigned char>(bytes[8]) | static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    off = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) bad("truncated header");
    for (int i = 0; i < 4; ++i) len |= static_cast<size_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
    off = 12;
  } else {
    bad("unknown .npy version " + std::to_string(major));
  }
  if (off + len > bytes.size()) bad("truncated header");
  const std::string header = bytes.substr(off, len);
  const bool is_f4 = header.find("'descr': '<f4'") != std::string::npos;
  const bool is_i4 = header.find("'descr': '<i4'") != std::string::npos;
  if (!is_f4 && !is_i4) bad("only little-endian float32 and int32 are read");
  if (header.find("'fortran_order': False") == std::string::npos) bad("Fortran order is not read");
  const size_t s = header.find("'shape': (");
  const size_t e = header.find(')', s);
  if (s == std::string::npos || e == std::string::npos) bad("no shape in the header");
  shape.clear();
  std::string dims = header.substr(s + 10, e - s - 10);
  size_t i = 0;
  while (i < dims.size()) {
    while (i < dims.size() && (dims[i] == ' ' || dims[i] == ',')) ++i;
    if (i >= dims.size()) break;
    size_t j = i;
    while (j < dims.size() && std::isdigit(static_cast<unsigned char>(dims[j]))) ++j;
    if (j == i) bad("cannot read the shape '" + dims + "'");
    shape.push_back(std::stoll(dims.substr(i, j - i)));
    i = j;
  }
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  const size_t body = off + len;
  if (bytes.size() - body != n * 4) bad("the data does not match the shape");
  data.resize(n);
  if (is_f4) {
    if (n) std::memcpy(data.data(), bytes.data() + body, n * 4);
  } else {
    for (size_t k = 0; k < n; ++k) {
      int32_t v;
      std::memcpy(&v, bytes.data() + body + 4 * k, 4);
      data[k] = static_cast<float>(v);
    }
  }
}

}  // namespace podsim
