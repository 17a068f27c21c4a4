// Random inputs and output comparison (see output_compare.h).
#include "support/output_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace npc::testing {
namespace {

// ---- 16-bit floats (the test's own small codecs) ----

double Bf16ToDouble(uint16_t bits) {
  uint32_t b = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

double HalfToDouble(uint16_t bits) {
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  const int exponent = (bits >> 10) & 0x1F;
  const int fraction = bits & 0x3FF;
  if (exponent == 0x1F) return fraction ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(fraction, -24);
  return sign * std::ldexp(1024 + fraction, exponent - 25);
}

// Bits of `v`, a value exactly representable as a normal f16 (or zero).
uint16_t ExactHalfBits(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (v == 0) return sign;
  int e;
  const double m = std::frexp(std::fabs(v), &e);  // |v| = m * 2^e, m in [0.5, 1)
  const int fraction = static_cast<int>((m * 2 - 1) * 1024);
  return sign | static_cast<uint16_t>((e - 1 + 15) << 10) | static_cast<uint16_t>(fraction);
}

// ---- random inputs ----

int64_t Uniform(std::mt19937& gen, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(gen() % static_cast<uint32_t>(hi - lo + 1));
}

}  // namespace

Tensor RandomTensor(const TensorSpec& spec, std::mt19937& gen, InputRanges ints) {
  Tensor t = ZeroTensor(spec.type, spec.dims);
  // k in [-limit, limit], or [1, limit].
  auto k = [&](int64_t limit) {
    return static_cast<double>(Uniform(gen, ints.positive_floats ? 1 : -limit, limit));
  };
  const int64_t n = t.element_count();
  for (int64_t i = 0; i < n; ++i) {
    switch (spec.type) {
      case xla::F32: t.data<float>()[i] = static_cast<float>(k(1000)) / 500.0f; break;
      case xla::F64: t.data<double>()[i] = k(1000) / 500.0; break;
      case xla::BF16: {
        const float f = static_cast<float>(k(128)) / 64.0f;
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        t.data<uint16_t>()[i] = static_cast<uint16_t>(bits >> 16);
        break;
      }
      case xla::F16: t.data<uint16_t>()[i] = ExactHalfBits(k(1024) / 512.0); break;
      case xla::PRED: t.data<uint8_t>()[i] = gen() & 1; break;
      case xla::S8:
        t.data<int8_t>()[i] = static_cast<int8_t>(Uniform(gen, ints.lo, ints.hi));
        break;
      case xla::S16:
        t.data<int16_t>()[i] = static_cast<int16_t>(Uniform(gen, ints.lo, ints.hi));
        break;
      case xla::S32:
        t.data<int32_t>()[i] = static_cast<int32_t>(Uniform(gen, ints.lo, ints.hi));
        break;
      case xla::S64: t.data<int64_t>()[i] = Uniform(gen, ints.lo, ints.hi); break;
      case xla::U8:
        t.data<uint8_t>()[i] =
            static_cast<uint8_t>(Uniform(gen, std::max<int64_t>(ints.lo, 0), ints.hi));
        break;
      case xla::U16:
        t.data<uint16_t>()[i] =
            static_cast<uint16_t>(Uniform(gen, std::max<int64_t>(ints.lo, 0), ints.hi));
        break;
      case xla::U32:
        t.data<uint32_t>()[i] =
            static_cast<uint32_t>(Uniform(gen, std::max<int64_t>(ints.lo, 0), ints.hi));
        break;
      case xla::U64:
        t.data<uint64_t>()[i] =
            static_cast<uint64_t>(Uniform(gen, std::max<int64_t>(ints.lo, 0), ints.hi));
        break;
      default: break;  // other types stay zero
    }
  }
  return t;
}

std::vector<Tensor> RandomArguments(const std::vector<TensorSpec>& specs, uint32_t seed, InputRanges ints) {
  std::mt19937 gen(seed);
  std::vector<Tensor> args;
  for (const auto& spec : specs) args.push_back(RandomTensor(spec, gen, ints));
  return args;
}

namespace {

// ---- comparison ----

bool IsFloatType(xla::PrimitiveType t) {
  return t == xla::F32 || t == xla::F64 || t == xla::BF16 || t == xla::F16;
}

// Element i of a floating-point tensor as a double.
double FloatAt(const Tensor& t, int64_t i) {
  switch (t.type) {
    case xla::F32: return t.data<float>()[i];
    case xla::F64: return t.data<double>()[i];
    case xla::BF16: return Bf16ToDouble(t.data<uint16_t>()[i]);
    default: return HalfToDouble(t.data<uint16_t>()[i]);  // F16
  }
}

// Element i of an integer or pred tensor as an int64 (u64 as its bits).
int64_t IntAt(const Tensor& t, int64_t i) {
  switch (t.type) {
    case xla::PRED: return t.data<uint8_t>()[i];
    case xla::S8: return t.data<int8_t>()[i];
    case xla::S16: return t.data<int16_t>()[i];
    case xla::S32: return t.data<int32_t>()[i];
    case xla::S64: return t.data<int64_t>()[i];
    case xla::U8: return t.data<uint8_t>()[i];
    case xla::U16: return t.data<uint16_t>()[i];
    case xla::U32: return t.data<uint32_t>()[i];
    default: return static_cast<int64_t>(t.data<uint64_t>()[i]);
  }
}

struct Tolerance {
  double rel;
  double abs;
};

Tolerance ToleranceFor(xla::PrimitiveType t) {
  switch (t) {
    case xla::BF16: return {std::ldexp(1.0, -7), std::ldexp(1.0, -7) * 0.1};
    case xla::F16: return {std::ldexp(1.0, -10), std::ldexp(1.0, -10) * 0.1};
    default: return {1e-5, 1e-6};  // F32, F64
  }
}

}  // namespace

// Compares the outputs of the host backend with the evaluator's.
Comparison CompareOutputs(const std::vector<Tensor>& host, const std::vector<Tensor>& ref) {
  Comparison c;
  std::ostringstream why;
  int reported = 0;
  auto mismatch = [&](const std::string& text) {
    c.matched = false;
    if (reported++ < 5) why << "  " << text << "\n";
  };
  if (host.size() != ref.size()) {
    mismatch("host gave " + std::to_string(host.size()) + " outputs, the evaluator " +
             std::to_string(ref.size()));
  }
  for (size_t o = 0; o < std::min(host.size(), ref.size()); ++o) {
    const Tensor& h = host[o];
    const Tensor& r = ref[o];
    if (h.type != r.type || h.dims != r.dims || h.bytes.size() != r.bytes.size()) {
      mismatch("output " + std::to_string(o) + ": host " + PrimitiveTypeName(h.type) + " with " +
               std::to_string(h.element_count()) + " elements, evaluator " +
               PrimitiveTypeName(r.type) + " with " + std::to_string(r.element_count()));
      continue;
    }
    const Tolerance tol = ToleranceFor(r.type);
    for (int64_t i = 0; i < r.element_count(); ++i) {
      if (IsFloatType(r.type)) {
        const double hv = FloatAt(h, i);
        const double rv = FloatAt(r, i);
        ++c.float_values;
        if ((std::isnan(hv) && std::isnan(rv)) || hv == rv) {
          ++c.identical;
          if (std::isnan(rv)) ++c.nan_values;
          continue;
        }
        const double err = std::fabs(hv - rv);
        if (std::isfinite(rv) && std::fabs(rv) > 0) {
          c.max_relative_error = std::max(c.max_relative_error, err / std::fabs(rv));
        }
        if (!(err <= tol.rel * std::fabs(rv) + tol.abs)) {  // NaN/inf mismatches land here too
          std::ostringstream m;
          m.precision(9);
          m << "output " << o << " element " << i << ": host " << hv << ", evaluator " << rv;
          mismatch(m.str());
        }
      } else if (IntAt(h, i) != IntAt(r, i)) {
        mismatch("output " + std::to_string(o) + " element " + std::to_string(i) + ": host " +
                 std::to_string(IntAt(h, i)) + ", evaluator " + std::to_string(IntAt(r, i)));
      }
    }
  }
  c.first_mismatches = why.str();
  return c;
}

}  // namespace npc::testing
