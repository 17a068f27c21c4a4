// The fixed helper code at the top of every generated translation unit.
// Changing it changes generated code: bump kCodegenVersion.
#include "host/prelude.h"

namespace npc::host {

const char kPrelude[] = R"PRELUDE(#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstddef>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using pred = std::uint8_t;  // 0 or 1
using s8 = std::int8_t;
using s16 = std::int16_t;
using s32 = std::int32_t;
using s64 = std::int64_t;
using u8 = std::uint8_t;
using u16 = std::uint16_t;
using u32 = std::uint32_t;
using u64 = std::uint64_t;
using f32 = float;
using f64 = double;
// 16-bit floats are stored as their bits and computed in f32, rounding each
// result back to nearest-even.
struct bf16 { u16 bits; };
struct f16 { u16 bits; };

// Integer arithmetic is done in an unsigned type at least as wide as int, so
// that overflow wraps instead of being undefined.
template <class T>
using npc_wide_u = std::make_unsigned_t<std::common_type_t<T, unsigned>>;

template <class T> inline T npc_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<npc_wide_u<T>>(a) + static_cast<npc_wide_u<T>>(b));
  else return a + b;
}
template <class T> inline T npc_sub(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<npc_wide_u<T>>(a) - static_cast<npc_wide_u<T>>(b));
  else return a - b;
}
template <class T> inline T npc_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<npc_wide_u<T>>(a) * static_cast<npc_wide_u<T>>(b));
  else return a * b;
}
template <class T> inline T npc_neg(T a) {
  if constexpr (std::is_integral_v<T>) return static_cast<T>(npc_wide_u<T>(0) - static_cast<npc_wide_u<T>>(a));
  else return -a;
}
// XLA: x / 0 = -1 (signed) or all ones (unsigned); INT_MIN / -1 = INT_MIN.
template <class T> inline T npc_div(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return std::is_signed_v<T> ? static_cast<T>(-1) : std::numeric_limits<T>::max();
    if constexpr (std::is_signed_v<T>) {
      if (b == static_cast<T>(-1) && a == std::numeric_limits<T>::min()) return a;
    }
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}
// XLA: x % 0 = x; INT_MIN % -1 = 0.
template <class T> inline T npc_rem(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return a;
    if constexpr (std::is_signed_v<T>) {
      if (b == static_cast<T>(-1)) return 0;
    }
    return static_cast<T>(a % b);
  } else {
    return std::fmod(a, b);
  }
}
// Floats: NaN propagates.
template <class T> inline T npc_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return (a > b || a != a) ? a : b;
  else return a > b ? a : b;
}
template <class T> inline T npc_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) return (a < b || a != a) ? a : b;
  else return a < b ? a : b;
}
template <class T> inline T npc_clamp(T lo, T x, T hi) { return npc_min<T>(npc_max<T>(x, lo), hi); }
template <class T> inline T npc_abs(T a) {
  if constexpr (std::is_floating_point_v<T>) return std::fabs(a);
  else if constexpr (std::is_signed_v<T>) return a < 0 ? npc_neg<T>(a) : a;
  else return a;
}
template <class T> inline T npc_sign(T a) {
  if constexpr (std::is_floating_point_v<T>) return a > 0 ? T(1) : a < 0 ? T(-1) : a;  // keeps NaN, +-0
  else if constexpr (std::is_signed_v<T>) return static_cast<T>((a > 0) - (a < 0));
  else return static_cast<T>(a != 0);
}
template <class T> inline T npc_pow(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::pow(a, b);
  } else {
    // XLA: an exponent that is negative as a signed number gives 1 for base 1, else 0.
    if (static_cast<std::make_signed_t<T>>(b) < 0) return a == 1 ? T(1) : T(0);
    T result = 1;
    npc_wide_u<T> e = static_cast<npc_wide_u<T>>(b);
    while (e != 0) {
      if (e & 1) result = npc_mul<T>(result, a);
      a = npc_mul<T>(a, a);
      e >>= 1;
    }
    return result;
  }
}
template <class T> inline T npc_rsqrt(T a) { return T(1) / std::sqrt(a); }
template <class T> inline T npc_logistic(T a) { return T(1) / (T(1) + std::exp(-a)); }
template <class T> inline T npc_round_even(T a) {
  T r = std::round(a);  // half away from zero
  if (std::fabs(a - std::trunc(a)) == T(0.5)) r = T(2) * std::round(a / T(2));
  return r;
}
template <class T> inline T npc_bnot(T a) { return static_cast<T>(~static_cast<npc_wide_u<T>>(a)); }
inline pred npc_lnot(pred a) { return static_cast<pred>(a ^ 1); }
template <class T> inline T npc_and(T a, T b) { return static_cast<T>(a & b); }
template <class T> inline T npc_or(T a, T b) { return static_cast<T>(a | b); }
template <class T> inline T npc_xor(T a, T b) { return static_cast<T>(a ^ b); }
// Shift amounts are read as unsigned; amounts >= the bit width give 0 (or the
// sign fill for an arithmetic right shift).
template <class T> inline T npc_shl(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if (static_cast<U>(b) >= sizeof(T) * 8) return 0;
  return static_cast<T>(static_cast<npc_wide_u<T>>(a) << static_cast<U>(b));
}
template <class T> inline T npc_shr_logical(T a, T b) {
  using U = std::make_unsigned_t<T>;
  if (static_cast<U>(b) >= sizeof(T) * 8) return 0;
  return static_cast<T>(static_cast<U>(a) >> static_cast<U>(b));
}
// Arithmetic right shift works on the bits as a signed number, also for
// unsigned types (XLA).
template <class T> inline T npc_shr_arith(T a, T b) {
  using U = std::make_unsigned_t<T>;
  using S = std::make_signed_t<T>;
  const S sa = static_cast<S>(a);
  if (static_cast<U>(b) >= sizeof(T) * 8) return sa < 0 ? static_cast<T>(-1) : T(0);
  // Without relying on implementation-defined behaviour of >> on negatives.
  const S r = sa < 0 ? static_cast<S>(~(~sa >> static_cast<U>(b))) : static_cast<S>(sa >> static_cast<U>(b));
  return static_cast<T>(r);
}
template <class T> inline T npc_popcnt(T a) {
  std::make_unsigned_t<T> u = static_cast<std::make_unsigned_t<T>>(a);
  T n = 0;
  while (u != 0) { n = static_cast<T>(n + (u & 1)); u = static_cast<std::make_unsigned_t<T>>(u >> 1); }
  return n;
}
template <class T> inline T npc_clz(T a) {
  std::make_unsigned_t<T> u = static_cast<std::make_unsigned_t<T>>(a);
  int n = static_cast<int>(sizeof(T) * 8);
  while (u != 0) { --n; u = static_cast<std::make_unsigned_t<T>>(u >> 1); }
  return static_cast<T>(n);
}
template <class T> inline pred npc_is_finite(T a) { return std::isfinite(a) ? 1 : 0; }

// Conversions. Float -> integer truncates toward zero; NaN gives 0; out of
// range clamps. Integer -> narrower integer wraps.
template <class To, class From> inline To npc_convert(From x) {
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (x != x) return 0;
    if (x <= static_cast<From>(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    if (x >= static_cast<From>(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    return static_cast<To>(x);
  } else {
    return static_cast<To>(x);
  }
}
template <class From> inline pred npc_to_pred(From x) { return x != 0 ? 1 : 0; }
template <class To, class From> inline To npc_bitcast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bitcast-convert between types of different sizes");
  To y;
  std::memcpy(&y, &x, sizeof y);
  return y;
}
inline f32 npc_f32(bf16 x) { return npc_bitcast<f32>(static_cast<u32>(x.bits) << 16); }
inline bf16 npc_to_bf16(f32 f) {
  u32 u = npc_bitcast<u32>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{static_cast<u16>((u >> 16) | 0x40u)};  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{static_cast<u16>(u >> 16)};
}
inline f32 npc_f32(f16 h) {
  const u32 sign = static_cast<u32>(h.bits & 0x8000u) << 16;
  const u32 exp = (h.bits >> 10) & 0x1fu, mant = h.bits & 0x3ffu;
  if (exp == 0) {
    const f32 f = static_cast<f32>(mant) * 5.9604644775390625e-8f;  // subnormal: mant * 2^-24
    return sign ? -f : f;
  }
  if (exp == 31) return npc_bitcast<f32>(sign | 0x7f800000u | (mant << 13));
  return npc_bitcast<f32>(sign | ((exp + 112u) << 23) | (mant << 13));
}
inline f16 npc_to_f16(f32 f) {
  u32 u = npc_bitcast<u32>(f);
  const u16 sign = static_cast<u16>((u >> 16) & 0x8000u);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return f16{static_cast<u16>(sign | 0x7e00u)};  // NaN
  if (u >= 0x477ff000u) return f16{static_cast<u16>(sign | 0x7c00u)};  // rounds to >= 65520: inf
  if (u < 0x38800000u) {  // below 2^-14: a subnormal half, in units of 2^-24
    const f32 a = npc_bitcast<f32>(u) * 16777216.0f;
    u32 m = static_cast<u32>(a);
    const f32 frac = a - static_cast<f32>(m);
    if (frac > 0.5f || (frac == 0.5f && (m & 1u))) ++m;
    return f16{static_cast<u16>(sign | m)};
  }
  u += 0xfffu + ((u >> 13) & 1u);
  return f16{static_cast<u16>(sign | (((u >> 23) - 112u) << 10) | ((u >> 13) & 0x3ffu))};
}
// Total order of floats (comparison_type TOTALORDER):
// -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
inline s32 npc_total_key(f32 x) { s32 i = npc_bitcast<s32>(x); return i < 0 ? (i ^ 0x7fffffff) : i; }
inline s64 npc_total_key(f64 x) { s64 i = npc_bitcast<s64>(x); return i < 0 ? (i ^ 0x7fffffffffffffffLL) : i; }
// A start index of dynamic-slice / dynamic-update-slice, clamped to [0, limit].
// A start index clamped to [0, limit] (limit >= 0). Unsigned indices are
// compared as 64-bit unsigned values, never against a limit truncated to
// their own width (a u8 index 50 with limit 300 stays 50).
template <class T> inline s64 npc_start_index(T x, s64 limit) {
  if constexpr (std::is_unsigned_v<T>) {
    return static_cast<unsigned long long>(x) > static_cast<unsigned long long>(limit) ? limit : static_cast<s64>(x);
  } else {
    const s64 v = static_cast<s64>(x);
    return v < 0 ? 0 : v > limit ? limit : v;
  }
}
// Large blocks freed during one npc_host_run, kept (at most four) for the
// next buffer of the same size: fresh memory costs a page fault per page. The
// pool belongs to the run on this thread and is emptied when it ends.
struct npc_pool {
  struct Block { std::size_t bytes; void* p; };
  std::vector<Block> blocks;
  npc_pool() = default;
  npc_pool(const npc_pool&) = delete;
  npc_pool& operator=(const npc_pool&) = delete;
  ~npc_pool() { for (const Block& b : blocks) ::operator delete(b.p); }
};
inline npc_pool*& npc_current_pool() {
  thread_local npc_pool* pool = nullptr;
  return pool;
}
inline void* npc_alloc(std::size_t bytes) {
  if (npc_pool* pool = npc_current_pool()) {
    for (std::size_t i = 0; i < pool->blocks.size(); ++i) {
      if (pool->blocks[i].bytes == bytes) {
        void* p = pool->blocks[i].p;
        pool->blocks.erase(pool->blocks.begin() + static_cast<std::ptrdiff_t>(i));
        return p;
      }
    }
  }
  return ::operator new(bytes);
}
inline void npc_free(void* p, std::size_t bytes) {
  npc_pool* pool = npc_current_pool();
  if (pool != nullptr && bytes >= (std::size_t{1} << 20) && pool->blocks.size() < 4) {
    pool->blocks.push_back({bytes, p});
    return;
  }
  ::operator delete(p);
}
// Makes `pool` the current thread's pool for the lifetime of this object.
struct npc_pool_scope {
  explicit npc_pool_scope(npc_pool* pool) { npc_current_pool() = pool; }
  ~npc_pool_scope() { npc_current_pool() = nullptr; }
};

// A heap buffer of n elements of a trivial type, left uninitialized unless a
// fill value is given (every op writes all of its result before it is read).
template <class T> class npc_buf {
 public:
  explicit npc_buf(s64 n) : n_(n > 0 ? n : 0) {
    if (n_ > 0) p_ = static_cast<T*>(npc_alloc(bytes()));
  }
  npc_buf(s64 n, T fill) : npc_buf(n) {
    for (s64 i = 0; i < n_; ++i) p_[i] = fill;
  }
  npc_buf(const npc_buf&) = delete;
  npc_buf& operator=(const npc_buf&) = delete;
  ~npc_buf() { release(); }
  T* data() { return p_; }
  void swap(npc_buf& other) {
    std::swap(p_, other.p_);
    std::swap(n_, other.n_);
  }
  void release() {
    if (p_ != nullptr) npc_free(p_, bytes());
    p_ = nullptr;
    n_ = 0;
  }

 private:
  std::size_t bytes() const { return static_cast<std::size_t>(n_) * sizeof(T); }
  T* p_ = nullptr;
  s64 n_ = 0;
};
template <class T> inline void npc_copy(T* dst, const T* src, s64 n) {
  if (n > 0) std::memcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T));
}

// GELU, exact form: x * Phi(x) = x/2 * (1 + erf(x / sqrt(2))), and its
// derivative Phi(x) + x * phi(x) (phi: the standard normal density).
template <class T> inline T npc_gelu(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
template <class T> inline T npc_gelu_dx(T x) {
  const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440)));
  return cdf + x * std::exp(T(-0.5) * x * x) * T(0.39894228040143267794);
}

// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC 2011) on the 128-bit counter x[0..3] (least significant word first)
// with the 64-bit key (k0, k1), in place.
inline void npc_philox4x32_10(u32 x[4], u32 k0, u32 k1) {
  for (int round = 0; round < 10; ++round) {
    const u64 a = static_cast<u64>(x[0]) * 0xD2511F53u;
    const u64 b = static_cast<u64>(x[2]) * 0xCD9E8D57u;
    const u32 y0 = static_cast<u32>(b >> 32) ^ x[1] ^ k0;
    const u32 y2 = static_cast<u32>(a >> 32) ^ x[3] ^ k1;
    x[0] = y0;
    x[1] = static_cast<u32>(b);
    x[2] = y2;
    x[3] = static_cast<u32>(a);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
// Output block j of XLA's Philox bit generator: Philox4x32-10 of the 128-bit
// counter (hi:lo) + j under the 64-bit key.
inline void npc_philox_block(u64 key, u64 lo, u64 hi, u64 j, u32 out[4]) {
  const u64 c_lo = lo + j;
  const u64 c_hi = c_lo < lo ? hi + 1 : hi;
  out[0] = static_cast<u32>(c_lo);
  out[1] = static_cast<u32>(c_lo >> 32);
  out[2] = static_cast<u32>(c_hi);
  out[3] = static_cast<u32>(c_hi >> 32);
  npc_philox4x32_10(out, static_cast<u32>(key), static_cast<u32>(key >> 32));
}

}  // namespace
)PRELUDE";

}  // namespace npc::host
