// PYPTO_TRACE: the Chrome trace-event file a run writes (see docs/runtime.md).
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <ostream>
#include <sstream>
#include <string>

#include "runtime/task_records.h"

namespace pypto::runtime {

namespace {

void json_string(std::ostream& os, const std::string& s) {
  os << '"';
  for (char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
}

// Microseconds with nanosecond precision, as Chrome's trace format expects.
std::string us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

}  // namespace

void Runtime::write_trace(const std::string& path, int64_t orch_end_ns, int64_t run_end_ns) {
  struct Row {
    const TraceEvent* ev;
    int tid;
  };
  std::vector<Row> rows;
  std::vector<int64_t> busy(trace_.size(), 0);
  for (size_t tid = 0; tid < trace_.size(); ++tid) {
    for (const TraceEvent& e : trace_[tid]) {
      rows.push_back(Row{&e, static_cast<int>(tid)});
      busy[tid] += e.end_ns - e.start_ns;
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.ev->start_ns < b.ev->start_ns; });

  std::ostringstream os;
  os << "{\"traceEvents\": [\n";
  os << R"(  {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "pypto runtime"}})";
  for (size_t tid = 0; tid < trace_.size(); ++tid) {
    os << ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " << tid << ", \"args\": {\"name\": ";
    json_string(os, tid == 0 ? std::string("orchestrator") : "worker " + std::to_string(tid));
    // A worker is idle whenever it runs no task during the run; the orchestrating
    // thread submits instead, so only its task time is reported.
    os << ", \"busy_us\": " << us(busy[tid]);
    if (tid != 0) os << ", \"idle_us\": " << us(std::max<int64_t>(run_end_ns - busy[tid], 0));
    os << "}}";
  }
  os << ",\n  {\"name\": \"orchestration\", \"cat\": \"orchestration\", \"ph\": \"X\", \"pid\": 0, \"tid\": 0, \"ts\": 0.000"
     << ", \"dur\": " << us(orch_end_ns) << ", \"args\": {\"tasks\": " << rows.size() << "}}";
  for (const Row& r : rows) {
    os << ",\n  {\"name\": ";
    json_string(os, r.ev->name);
    os << ", \"cat\": \"task\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << r.tid << ", \"ts\": " << us(r.ev->start_ns)
       << ", \"dur\": " << us(r.ev->end_ns - r.ev->start_ns) << ", \"args\": {\"task\": " << r.ev->id;
    if (r.ev->cancelled) os << ", \"cancelled\": true";
    os << "}}";
  }
  os << "\n], \"displayTimeUnit\": \"ns\", \"otherData\": {\"run_us\": " << us(run_end_ns)
     << ", \"orchestration_us\": " << us(orch_end_ns) << ", \"workers\": " << (trace_.size() - 1)
     << ", \"tasks\": " << rows.size() << "}}\n";

  // Only a regular file (or a new one): opening a FIFO with no reader would block forever.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw TraceError("PYPTO_TRACE: '" + path + "' is not a regular file; the trace was not written");
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    throw TraceError("PYPTO_TRACE: cannot open '" + path + "' for writing" +
                     (errno ? std::string(": ") + std::strerror(errno) : std::string()));
  f << os.str();
  f.close();
  if (!f) throw TraceError("PYPTO_TRACE: failed to write '" + path + "'");
  for (auto& events : trace_) std::vector<TraceEvent>().swap(events);
}

}  // namespace pypto::runtime
