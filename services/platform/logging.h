// Structured logging on spdlog: one event per line, with key=value fields (service, rpc, job,
// ...). JSON lines by default (for log collectors), plain text for terminals:
//
//   {"ts":"2024-05-01T12:00:00.123456Z","level":"info","msg":"listening","service":"goodput-ofu","port":50051}
//   2024-05-01T12:00:00.123 I listening service=goodput-ofu port=50051
//
// Usage:
//   absl::StatusOr<Logger> log = Logger::Create(config.log, config.service_name);
//   SetDefaultLogger(*log);
//   Logger job_log = log->With({{"job", job_id}});
//   job_log.Info("window computed", {{"window_s", 60}, {"ofu", 0.42}});
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/platform/config.h"
#include "spdlog/logger.h"

namespace goodput::platform {

// A field value: text (quoted in JSON) or a number/bool (bare).
class LogValue {
 public:
  LogValue(absl::string_view text)
      : text_(text.data(), text.size()), quoted_(true) {}            // NOLINT: implicit by design
  LogValue(const char* text) : text_(text), quoted_(true) {}         // NOLINT
  LogValue(const std::string& text) : text_(text), quoted_(true) {}  // NOLINT
  LogValue(bool value) : text_(value ? "true" : "false"), quoted_(false) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  LogValue(T value) : text_(std::to_string(value)), quoted_(false) {}  // NOLINT
  LogValue(double value);                                              // NOLINT

  const std::string& text() const { return text_; }
  bool quoted() const { return quoted_; }

 private:
  std::string text_;
  bool quoted_;
};

struct LogField {
  std::string key;
  LogValue value;
};
using LogFields = std::initializer_list<LogField>;

// A logger with bound fields. Cheap to copy; thread-safe.
class Logger {
 public:
  // Logs through the process default (see SetDefaultLogger); JSON to stderr at info until set.
  Logger();

  // A logger writing to `sink` (stderr when null) in `config`'s format and level, with field
  // service=<service_name> on every line. INVALID_ARGUMENT names an unknown level.
  static absl::StatusOr<Logger> Create(const LogConfig& config, absl::string_view service_name,
                                       spdlog::sink_ptr sink = nullptr);

  // A copy that adds `fields` to every line (later fields with the same key come after).
  Logger With(LogFields fields) const;

  void Log(spdlog::level::level_enum level, absl::string_view message, LogFields fields = {}) const;
  void Debug(absl::string_view message, LogFields fields = {}) const {
    Log(spdlog::level::debug, message, fields);
  }
  void Info(absl::string_view message, LogFields fields = {}) const {
    Log(spdlog::level::info, message, fields);
  }
  void Warn(absl::string_view message, LogFields fields = {}) const {
    Log(spdlog::level::warn, message, fields);
  }
  void Error(absl::string_view message, LogFields fields = {}) const {
    Log(spdlog::level::err, message, fields);
  }
  // True when `level` would be written (skip building expensive fields otherwise).
  bool Enabled(spdlog::level::level_enum level) const;
  void Flush() const;

 private:
  friend void SetDefaultLogger(const Logger& logger);
  Logger(std::shared_ptr<spdlog::logger> logger, LogFormat format)
      : logger_(std::move(logger)), format_(format) {}

  std::shared_ptr<spdlog::logger> logger_;
  LogFormat format_ = LogFormat::kJson;
  std::vector<LogField> bound_;
};

// Replaces the process default that default-constructed Loggers use.
void SetDefaultLogger(const Logger& logger);

}  // namespace goodput::platform
