// TraceSink: the trace file, written in large blocks, through zlib's gzip stream when asked. Trace processor
// auto-detects gzip for both formats; zstd it rejects, so gzip is the only compression offered.
#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "sim/trace/trace_backend.h"

namespace podsim {

TraceSink::TraceSink(const std::string& path, bool gzip) : m_path(path) {
  m_buf.reserve(kFlushBytes + (kFlushBytes >> 2));
  if (gzip) {
    // Level 6 (zlib's default) is what the size measurements in the reference used; "wb" truncates.
    m_gz = gzopen(path.c_str(), "wb6");
    if (!m_gz) fail("cannot create trace file");
    // A large internal buffer keeps zlib from compressing in small pieces.
    gzbuffer(m_gz, 1 << 17);
  } else {
    m_file = std::fopen(path.c_str(), "wb");
    if (!m_file) fail("cannot create trace file");
  }
}

TraceSink::~TraceSink() {
  if (m_gz) gzclose(m_gz);
  if (m_file) std::fclose(m_file);
}

void TraceSink::fail(const std::string& what) {
  int err = errno;
  std::string reason = err ? std::strerror(err) : "I/O error";
  if (m_gz) {
    int zerr = Z_OK;
    const char* msg = gzerror(m_gz, &zerr);
    if (zerr != Z_OK && zerr != Z_ERRNO && msg) reason = msg;
  }
  throw Error(Err::OutputUnwritable, what + " " + m_path + ": " + reason);
}

void TraceSink::flush() {
  if (m_buf.empty()) return;
  errno = 0;
  if (m_gz) {
    // gzwrite takes an unsigned length; the buffer is flushed long before that matters.
    if (gzwrite(m_gz, m_buf.data(), static_cast<unsigned>(m_buf.size())) != static_cast<int>(m_buf.size())) {
      fail("cannot write trace file");
    }
  } else if (m_file) {
    if (std::fwrite(m_buf.data(), 1, m_buf.size(), m_file) != m_buf.size()) fail("cannot write trace file");
  } else {
    throw Error(Err::Internal, "trace file " + m_path + " written after it was closed");
  }
  m_bytes += m_buf.size();
  m_buf.clear();
}

void TraceSink::close() {
  flush();
  errno = 0;
  if (m_gz) {
    gzFile_s* gz = m_gz;
    int rc = gzclose(gz);
    m_gz = nullptr;
    if (rc != Z_OK) {
      std::string reason = rc == Z_ERRNO && errno ? std::strerror(errno) : "zlib error " + std::to_string(rc);
      throw Error(Err::OutputUnwritable, "cannot finish trace file " + m_path + ": " + reason);
    }
  } else if (m_file) {
    // fclose flushes stdio's own buffer: a full disk often shows up only here.
    std::FILE* f = m_file;
    m_file = nullptr;
    if (std::fclose(f) != 0) fail("cannot finish trace file");
  }
}

}  // namespace podsim
