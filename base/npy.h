// NumPy .npy (format 1.0) writer, so numpy or any other tool reads podsim's tensors: np.load("tensors/w.npy").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podsim {

// Writes little-endian float32 (or int32, converting exact integral values) with the given shape.
void write_npy(const std::string& path, const std::vector<int64_t>& shape, const std::vector<float>& data,
               bool as_int32 = false);

// Reads an .npy file of little-endian float32 or int32 (C order) into floats; throws Error(FileUnreadable)
// naming what is wrong otherwise.
void read_npy(const std::string& path, std::vector<int64_t>& shape, std::vector<float>& data);

// The bytes of an .npy file (used by write_npy and by tests).
std::string npy_bytes(const std::vector<int64_t>& shape, const std::vector<float>& data, bool as_int32 = false);

}  // namespace podsim
