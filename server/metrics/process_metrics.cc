#include "server/metrics/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace kerneleval::server {
namespace {

// Fields of /proc/self/stat after the command name, which may itself hold spaces and
// parentheses (proc(5): field 3 onwards follows the last ')').
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  std::getline(in, line);
  const std::size_t close = line.rfind(')');
  std::vector<std::string> fields;
  if (close == std::string::npos) return fields;
  std::istringstream rest(line.substr(close + 1));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;  // fields[0] is field 3 (state)
}

// Field n (1-based, as proc(5) numbers them) of /proc/self/stat, or -1.
double StatField(const std::vector<std::string>& fields, std::size_t n) {
  if (n < 3 || n - 3 >= fields.size()) return -1;
  return std::stod(fields[n - 3]);
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double btime = 0;
      in >> btime;
      return btime;
    }
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

double OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  double count = 0;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the descriptor opendir itself holds
}

prometheus::MetricFamily One(const char* name, const char* help, prometheus::MetricType type,
                             double value) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  prometheus::ClientMetric m;
  if (type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(m);
  return f;
}

}  // namespace

ProcessCollector::ProcessCollector() {
  // Field 22: start time in clock ticks after boot.
  const double ticks = StatField(StatFields(), 22);
  const double boot = BootTimeSeconds();
  const long hz = sysconf(_SC_CLK_TCK);
  if (ticks >= 0 && boot > 0 && hz > 0) start_time_seconds_ = boot + ticks / hz;
}

std::vector<prometheus::MetricFamily> ProcessCollector::Collect() const {
  using prometheus::MetricType;
  std::vector<prometheus::MetricFamily> out;
  if (start_time_seconds_ > 0) {
    out.push_back(One("process_start_time_seconds",
                      "Start time of the process since unix epoch in seconds", MetricType::Gauge,
                      start_time_seconds_));
  }
  const std::vector<std::string> fields = StatFields();
  const long hz = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  // Fields 14 and 15: user and system time in clock ticks; 23: virtual size in bytes;
  // 24: resident set in pages.
  const double utime = StatField(fields, 14), stime = StatField(fields, 15);
  if (utime >= 0 && stime >= 0 && hz > 0) {
    out.push_back(One("process_cpu_seconds_total",
                      "Total user and system CPU time spent in seconds", MetricType::Counter,
                      (utime + stime) / hz));
  }
  if (const double vsize = StatField(fields, 23); vsize >= 0) {
    out.push_back(One("process_virtual_memory_bytes", "Virtual memory size in bytes",
                      MetricType::Gauge, vsize));
  }
  if (const double rss = StatField(fields, 24); rss >= 0 && page > 0) {
    out.push_back(One("process_resident_memory_bytes", "Resident memory size in bytes",
                      MetricType::Gauge, rss * page));
  }
  if (const double fds = OpenFds(); fds >= 0) {
    out.push_back(
        One("process_open_fds", "Number of open file descriptors", MetricType::Gauge, fds));
  }
  return out;
}

}  // namespace kerneleval::server
