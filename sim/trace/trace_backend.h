// Internal to sim/trace: the output file (plain or gzip) and the interface of the two format encoders behind
// TraceWriter. TraceWriter has already checked every call (declared tracks, nesting, flow ids), so a backend only
// encodes; it sees each slice twice: slice_begin when the simulator reports it, slice_end when the writer knows no
// later slice on that track can nest inside it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/trace/trace_writer.h"

struct gzFile_s;  // zlib's gzFile, kept out of this header

namespace podsim {

// Buffered output to a file, gzip-compressed or not. Throws Error(Err::OutputUnwritable) on any I/O failure.
class TraceSink {
 public:
  TraceSink(const std::string& path, bool gzip);
  ~TraceSink();  // closes without reporting errors; call close() to hear of them
  TraceSink(const TraceSink&) = delete;
  TraceSink& operator=(const TraceSink&) = delete;

  // Encoders append to the buffer directly and call maybe_flush() after each record.
  std::string& buffer() { return m_buf; }
  void append(std::string_view s) { m_buf.append(s); }
  void maybe_flush() {
    if (m_buf.size() >= kFlushBytes) flush();
  }
  void close();
  uint64_t bytes_written() const { return m_bytes; }  // uncompressed

 private:
  static constexpr size_t kFlushBytes = 1 << 18;
  void flush();
  [[noreturn]] void fail(const std::string& what);

  std::string m_path;
  std::string m_buf;
  std::FILE* m_file = nullptr;
  gzFile_s* m_gz = nullptr;
  uint64_t m_bytes = 0;
};

class TraceBackend {
 public:
  virtual ~TraceBackend() = default;

  virtual void process(uint64_t uuid, const std::string& name, int pid, int rank) = 0;
  virtual void global(uint64_t uuid, const std::string& name, int rank) = 0;
  virtual void child(uint64_t uuid, uint64_t parent, const std::string& name, int rank) = 0;
  virtual void counter(uint64_t uuid, uint64_t parent, const std::string& name, const std::string& unit, int rank,
                       const std::string& share_key) = 0;

  virtual void slice_begin(uint64_t track, uint64_t begin_ns, uint64_t end_ns, const std::string& name,
                           const std::vector<TraceArg>& args, const std::vector<uint64_t>& flows_out,
                           const std::vector<uint64_t>& flows_in) = 0;
  virtual void slice_end(uint64_t track, uint64_t end_ns) = 0;
  virtual void counter_value(uint64_t track, uint64_t ts_ns, double v) = 0;

  // Write whatever trails the events, flush and close the file.
  virtual void finish() = 0;
};

std::unique_ptr<TraceBackend> make_pftrace_backend(std::unique_ptr<TraceSink> sink);
std::unique_ptr<TraceBackend> make_json_backend(std::unique_ptr<TraceSink> sink);

}  // namespace podsim
