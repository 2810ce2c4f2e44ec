#include "services/platform/sql_split.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace goodput::platform {
namespace {

bool IsIdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// One token of the lexer: what to skip over as a unit.
enum class Kind { kCode, kString, kIdentifier, kDollar, kLineComment, kBlockComment, kEnd };

struct Lexer {
  absl::string_view s;
  size_t i = 0;
  int line = 1;

  void Advance(size_t n) {
    for (size_t k = 0; k < n && i < s.size(); ++k, ++i) {
      if (s[i] == '\n') ++line;
    }
  }

  // The dollar-quote tag starting at i ("$$" or "$name$"), or "" when i does not start one.
  absl::string_view DollarTag() const {
    if (s[i] != '$') return {};
    // A positional parameter ($1) or an identifier char before it is not a quote.
    if (i > 0 && IsIdentChar(s[i - 1])) return {};
    size_t j = i + 1;
    if (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j])) != 0) return {};
    while (j < s.size() && IsIdentChar(s[j])) ++j;
    if (j < s.size() && s[j] == '$') return s.substr(i, j - i + 1);
    return {};
  }

  // Skips the quoted or commented span at i (which `kind` says it is). False when unclosed.
  bool SkipSpan(Kind kind, absl::string_view tag) {
    switch (kind) {
      case Kind::kString:
      case Kind::kIdentifier: {
        const char quote = kind == Kind::kString ? '\'' : '"';
        // E'...' strings take backslash escapes.
        const bool escapes = kind == Kind::kString && i > 0 &&
                             (s[i - 1] == 'E' || s[i - 1] == 'e') &&
                             (i < 2 || !IsIdentChar(s[i - 2]));
        Advance(1);
        while (i < s.size()) {
          if (escapes && s[i] == '\\') {
            Advance(2);
          } else if (s[i] == quote) {
            if (i + 1 < s.size() && s[i + 1] == quote) {
              Advance(2);
            } else {
              Advance(1);
              return true;
            }
          } else {
            Advance(1);
          }
        }
        return false;
      }
      case Kind::kDollar: {
        Advance(tag.size());
        size_t end = s.find(tag, i);
        if (end == absl::string_view::npos) {
          Advance(s.size() - i);
          return false;
        }
        Advance(end - i + tag.size());
        return true;
      }
      case Kind::kLineComment: {
        size_t end = s.find('\n', i);
        Advance(end == absl::string_view::npos ? s.size() - i : end - i);
        return true;
      }
      case Kind::kBlockComment: {
        int depth = 0;
        while (i < s.size()) {
          if (s.substr(i, 2) == "/*") {
            ++depth;
            Advance(2);
          } else if (s.substr(i, 2) == "*/") {
            --depth;
            Advance(2);
            if (depth == 0) return true;
          } else {
            Advance(1);
          }
        }
        return false;
      }
      default:
        return true;
    }
  }

  // What starts at i.
  Kind Peek(absl::string_view* tag) const {
    if (i >= s.size()) return Kind::kEnd;
    const char c = s[i];
    if (c == '\'') return Kind::kString;
    if (c == '"') return Kind::kIdentifier;
    if (c == '-' && s.substr(i, 2) == "--") return Kind::kLineComment;
    if (c == '/' && s.substr(i, 2) == "/*") return Kind::kBlockComment;
    if (c == '$') {
      *tag = DollarTag();
      if (!tag->empty()) return Kind::kDollar;
    }
    return Kind::kCode;
  }
};

absl::string_view KindName(Kind kind) {
  switch (kind) {
    case Kind::kString:
      return "string literal";
    case Kind::kIdentifier:
      return "quoted identifier";
    case Kind::kDollar:
      return "dollar-quoted body";
    case Kind::kBlockComment:
      return "/* comment";
    default:
      return "span";
  }
}

bool OnlySpaceAndComments(absl::string_view text) {
  Lexer lx{text};
  absl::string_view tag;
  while (lx.i < text.size()) {
    Kind kind = lx.Peek(&tag);
    if (kind == Kind::kLineComment || kind == Kind::kBlockComment) {
      lx.SkipSpan(kind, tag);
    } else if (std::isspace(static_cast<unsigned char>(text[lx.i])) != 0) {
      lx.Advance(1);
    } else {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<SqlStatement>> SplitSqlStatements(absl::string_view script) {
  std::vector<SqlStatement> out;
  Lexer lx{script};
  size_t start = 0;
  int start_line = 1;
  auto flush = [&](size_t end) {
    absl::string_view text = script.substr(start, end - start);
    if (!OnlySpaceAndComments(text)) {
      // The statement's line is that of its first non-blank character.
      size_t first = 0;
      int line = start_line;
      while (first < text.size() && std::isspace(static_cast<unsigned char>(text[first])) != 0) {
        if (text[first] == '\n') ++line;
        ++first;
      }
      out.push_back({std::string(absl::StripAsciiWhitespace(text)), line});
    }
  };
  absl::string_view tag;
  while (lx.i < script.size()) {
    Kind kind = lx.Peek(&tag);
    if (kind == Kind::kCode) {
      if (script[lx.i] == ';') {
        flush(lx.i);
        lx.Advance(1);
        start = lx.i;
        start_line = lx.line;
      } else {
        lx.Advance(1);
      }
      continue;
    }
    const int opened_at = lx.line;
    if (!lx.SkipSpan(kind, tag)) {
      return absl::InvalidArgumentError(
          absl::StrCat("line ", opened_at, ": ", KindName(kind), " is never closed"));
    }
  }
  flush(script.size());
  return out;
}

std::string NormalizeSql(absl::string_view statement) {
  std::string out;
  Lexer lx{statement};
  absl::string_view tag;
  bool space = false;
  auto put = [&](absl::string_view text) {
    if (space && !out.empty()) out.push_back(' ');
    space = false;
    out.append(text.data(), text.size());
  };
  while (lx.i < statement.size()) {
    Kind kind = lx.Peek(&tag);
    const size_t begin = lx.i;
    switch (kind) {
      case Kind::kLineComment:
      case Kind::kBlockComment:
        lx.SkipSpan(kind, tag);
        space = true;
        break;
      case Kind::kString:
        lx.SkipSpan(kind, tag);
        put("''");
        break;
      case Kind::kDollar:
        lx.SkipSpan(kind, tag);
        put("$$ $$");
        break;
      case Kind::kIdentifier:
        lx.SkipSpan(kind, tag);
        put(statement.substr(begin, lx.i - begin));
        break;
      default: {
        const char c = statement[lx.i];
        lx.Advance(1);
        if (std::isspace(static_cast<unsigned char>(c)) != 0) {
          space = true;
        } else {
          put(std::string(1, absl::ascii_toupper(static_cast<unsigned char>(c))));
        }
      }
    }
  }
  return out;
}

}  // namespace goodput::platform
