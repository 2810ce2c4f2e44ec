// A main for libFuzzer targets where libFuzzer is not there (gcc builds, CI): runs
// LLVMFuzzerTestOneInput on every file of the corpus given, then on `--mutations` inputs
// made from them by a seeded generator (bit flips, bytes set, inserted, erased and repeated,
// large CBOR lengths, long runs of one byte), so that a ctest exercises the target with the
// same inputs on every run. A target that crashes or aborts fails the test.
//
//   goodput_..._fuzz_replay --mutations=20000 --seed=1 corpus_dir
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using Bytes = std::vector<uint8_t>;

void Run(const Bytes& input) { LLVMFuzzerTestOneInput(input.data(), input.size()); }

Bytes Mutate(Bytes b, std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  const int steps = 1 + static_cast<int>(rng() % 4);
  for (int s = 0; s < steps; ++s) {
    switch (rng() % 7) {
      case 0:  // flip a bit
        if (!b.empty()) b[pick(b.size())] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:  // set a byte
        if (!b.empty()) b[pick(b.size())] = static_cast<uint8_t>(rng());
        break;
      case 2: {  // insert random bytes
        const size_t at = pick(b.size() + 1);
        const size_t n = 1 + pick(8);
        for (size_t i = 0; i < n; ++i) b.insert(b.begin() + at, static_cast<uint8_t>(rng()));
        break;
      }
      case 3: {  // erase a range
        if (b.empty()) break;
        const size_t at = pick(b.size());
        const size_t n = std::min(b.size() - at, 1 + pick(16));
        b.erase(b.begin() + at, b.begin() + at + n);
        break;
      }
      case 4: {  // repeat a range
        if (b.empty()) break;
        const size_t at = pick(b.size());
        const size_t n = std::min(b.size() - at, 1 + pick(64));
        const Bytes piece(b.begin() + at, b.begin() + at + n);
        const size_t times = 1 + pick(32);
        for (size_t i = 0; i < times; ++i) b.insert(b.begin() + at, piece.begin(), piece.end());
        break;
      }
      case 5: {  // a CBOR array/map/string header declaring a large length
        static constexpr uint8_t kHeads[] = {0x9b, 0xbb, 0x7b, 0x5b, 0x9a, 0xba, 0x7a};
        const uint8_t head = kHeads[pick(sizeof(kHeads))];
        const size_t at = pick(b.size() + 1);
        Bytes h = {head};
        const size_t len = head == 0x9a || head == 0xba || head == 0x7a ? 4 : 8;
        for (size_t i = 0; i < len; ++i) h.push_back(i == 0 ? 0x00 : static_cast<uint8_t>(rng()));
        b.insert(b.begin() + at, h.begin(), h.end());
        break;
      }
      default: {  // a long run of one byte (nesting: 0x81, 0x9f, 0xa1, 0xc6 ...)
        static constexpr uint8_t kRuns[] = {0x81, 0x9f, 0xa1, 0xbf, 0xc6, 0xd8, 0x00};
        const size_t at = pick(b.size() + 1);
        b.insert(b.begin() + at, 100 + pick(100000), kRuns[pick(sizeof(kRuns))]);
        break;
      }
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  long mutations = 0;
  unsigned long long seed = 1;
  std::vector<Bytes> corpus;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--mutations=", 0) == 0) {
      mutations = std::strtol(arg.c_str() + 12, nullptr, 10);
      continue;
    }
    if (arg.rfind("--seed=", 0) == 0) {
      seed = std::strtoull(arg.c_str() + 7, nullptr, 10);
      continue;
    }
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
    } else {
      files.push_back(arg);
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", f.c_str());
        return 2;
      }
      corpus.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
  }
  if (corpus.empty()) corpus.emplace_back();
  long runs = 0;
  for (const Bytes& input : corpus) {
    Run(input);
    ++runs;
  }
  std::mt19937_64 rng(seed);
  for (long i = 0; i < mutations; ++i) {
    Run(Mutate(corpus[rng() % corpus.size()], rng));
    ++runs;
  }
  std::printf("%zu corpus inputs, %ld executions, seed %llu: no crash\n", corpus.size(), runs,
              seed);
  return 0;
}
