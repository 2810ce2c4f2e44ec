#pragma once
// Deterministic random numbers for the fleet simulator: the same seed gives the same fleet on
// every platform and standard library (std::*_distribution is implementation-defined, so the
// distributions are written out here).

#include <cmath>
#include <cstdint>
#include <numbers>

namespace goodput::sim {

// SplitMix64: mixes a seed and a stream id into independent generator seeds.
inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Seed for stream `stream` of generator `seed` (e.g. one per job, one per job window).
inline uint64_t DeriveSeed(uint64_t seed, uint64_t stream) {
  return SplitMix64(SplitMix64(seed) ^ SplitMix64(stream + 0x632be59bd9b4e019ULL));
}

// xoshiro256**: small, fast, good statistical quality.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t x = seed;
    for (uint64_t& s : s_) {
      x = SplitMix64(x);
      s = x;
    }
  }
  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  double Uniform(double low, double high) { return low + (high - low) * Uniform(); }
  // Uniform integer in [low, high].
  int64_t UniformInt(int64_t low, int64_t high) {
    return low + static_cast<int64_t>(Uniform() * static_cast<double>(high - low + 1));
  }
  bool Bernoulli(double p) { return Uniform() < p; }
  // Standard normal (Box-Muller, both values used).
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = Uniform();
    while (u1 <= 0) u1 = Uniform();
    const double u2 = Uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2 * std::numbers::pi * u2);
    has_spare_ = true;
    return r * std::cos(2 * std::numbers::pi * u2);
  }
  double Normal(double mean, double sd) { return mean + sd * Normal(); }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace goodput::sim
