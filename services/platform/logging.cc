#include "services/platform/logging.h"

#include <charconv>
#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace goodput::platform {
namespace {

constexpr char kJsonPattern[] = R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l",%v})";
constexpr char kTextPattern[] = "%Y-%m-%dT%H:%M:%S.%e %L %v";

void AppendJsonString(std::string* out, absl::string_view text) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          *out += "\\u00";
          out->push_back(kHex[(c >> 4) & 0xf]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

bool NeedsQuotes(absl::string_view text) {
  if (text.empty()) return true;
  for (char c : text) {
    if (c == ' ' || c == '=' || c == '"' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

void AppendTextValue(std::string* out, const LogValue& value) {
  if (value.quoted() && NeedsQuotes(value.text())) {
    AppendJsonString(out, value.text());
  } else {
    *out += value.text();
  }
}

void AppendField(std::string* out, LogFormat format, const LogField& field) {
  if (format == LogFormat::kJson) {
    out->push_back(',');
    AppendJsonString(out, field.key);
    out->push_back(':');
    if (field.value.quoted()) {
      AppendJsonString(out, field.value.text());
    } else {
      *out += field.value.text();
    }
  } else {
    absl::StrAppend(out, " ", field.key, "=");
    AppendTextValue(out, field.value);
  }
}

std::shared_ptr<spdlog::logger> MakeSpdlogger(spdlog::sink_ptr sink, LogFormat format,
                                              spdlog::level::level_enum level) {
  auto logger = std::make_shared<spdlog::logger>("goodput", std::move(sink));
  logger->set_pattern(format == LogFormat::kJson ? kJsonPattern : kTextPattern,
                      spdlog::pattern_time_type::utc);
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  return logger;
}

struct DefaultLogger {
  std::mutex mu;
  std::shared_ptr<spdlog::logger> logger;
  LogFormat format = LogFormat::kJson;
  std::vector<LogField> bound;
};

DefaultLogger& Default() {
  static auto* instance = [] {
    auto* d = new DefaultLogger();
    d->logger = MakeSpdlogger(std::make_shared<spdlog::sinks::stderr_sink_mt>(), LogFormat::kJson,
                              spdlog::level::info);
    return d;
  }();
  return *instance;
}

}  // namespace

LogValue::LogValue(double value) : quoted_(false) {
  if (std::isfinite(value)) {
    char buffer[64];
    auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    text_.assign(buffer, result.ptr);
  } else {
    // JSON has no NaN/Inf literals: log them as strings.
    text_ = std::isnan(value) ? "NaN" : (value > 0 ? "+Inf" : "-Inf");
    quoted_ = true;
  }
}

Logger::Logger() {
  DefaultLogger& d = Default();
  std::lock_guard lock(d.mu);
  logger_ = d.logger;
  format_ = d.format;
  bound_ = d.bound;
}

absl::StatusOr<Logger> Logger::Create(const LogConfig& config, absl::string_view service_name,
                                      spdlog::sink_ptr sink) {
  spdlog::level::level_enum level = spdlog::level::from_str(config.level);
  // from_str answers `off` for anything it does not know.
  if (level == spdlog::level::off && config.level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("config key log.level: \"", config.level, "\" is not a log level"));
  }
  if (sink == nullptr) {
    if (config.format == LogFormat::kText) {
      sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
    } else {
      sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    }
  }
  Logger logger(MakeSpdlogger(std::move(sink), config.format, level), config.format);
  logger.bound_.push_back(LogField{"service", LogValue(service_name)});
  return logger;
}

Logger Logger::With(LogFields fields) const {
  Logger copy = *this;
  copy.bound_.insert(copy.bound_.end(), fields.begin(), fields.end());
  return copy;
}

bool Logger::Enabled(spdlog::level::level_enum level) const { return logger_->should_log(level); }

void Logger::Log(spdlog::level::level_enum level, absl::string_view message,
                 LogFields fields) const {
  if (!logger_->should_log(level)) return;
  std::string line;
  if (format_ == LogFormat::kJson) {
    line = "\"msg\":";
    AppendJsonString(&line, message);
  } else {
    line.assign(message.data(), message.size());
  }
  for (const LogField& field : bound_) AppendField(&line, format_, field);
  for (const LogField& field : fields) AppendField(&line, format_, field);
  logger_->log(level, "{}", line);
}

void Logger::Flush() const { logger_->flush(); }

void SetDefaultLogger(const Logger& logger) {
  DefaultLogger& d = Default();
  std::lock_guard lock(d.mu);
  d.logger = logger.logger_;
  d.format = logger.format_;
  d.bound = logger.bound_;
}

}  // namespace goodput::platform
