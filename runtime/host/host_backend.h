// The reference host backend: HLO module -> C++ source -> the system C++
// compiler -> a shared object (the "artifact", `model.so`) -> loaded and run
// on host buffers.
//
// Pipeline:
//   auto src = GenerateCpp(module);                    // deterministic C++ text
//   write *src to dir/model.cc;
//   CompileSharedObject(cxx, dir/model.cc, dir/model.so, &log);
//   auto exe = HostExecutable::Load(dir/model.so);
//   auto outs = (*exe)->Run({x, w});
//
// Supported subset (element types pred, s8, s16, s32, s64, u8, u16, u32, u64,
// f32, f64, bf16, f16; bf16/f16 are stored as their 16 bits and every op on
// them computes in f32 and rounds its result to nearest-even; a dot with a
// bf16/f16 result accumulates in f32 and rounds once):
//   parameter, constant, iota, broadcast, reshape, copy, transpose, slice,
//   dynamic-slice, dynamic-update-slice, concatenate, pad, reverse, dot,
//   gather, scatter (one operand; no batching dimensions),
//   reduce (variadic too; the reducer is any scalar computation), map, call,
//   fusion, tuple, get-tuple-element, opt-barrier, convert, bitcast-convert,
//   compare (EQ NE LT LE GT GE; comparison_type TOTALORDER for floats), select,
//   clamp, and the elementwise ops add subtract multiply divide remainder
//   maximum minimum power atan2 and or xor not shift-left shift-right-logical
//   shift-right-arithmetic negate abs sign floor ceil round-nearest-afz
//   round-nearest-even exponential exponential-minus-one log log-plus-one
//   logistic sqrt rsqrt cbrt sine cosine tan tanh erf is-finite popcnt
//   count-leading-zeros; custom-call AwsNeuronTransferWithStaticRing (a
//   torch-neuronx transfer hint on weights) is the identity; all-reduce,
//   all-gather and reduce-scatter with one participant are the identity on
//   each operand (the host backend runs a single replica: every replica group
//   must have at most one member, and no groups means all replicas, i.e. this
//   one; a collective with more participants fails the compile, naming them).
// Anything else (other custom-calls, while, conditional, sort, reduce-window,
// collectives over several replicas, rng, ...) makes GenerateCpp fail with an Error naming the
// opcode, the instruction and the computation. Only instructions reachable
// from a computation's root are compiled (dead code is ignored).
//
// Semantics worth knowing (all defined, no undefined behaviour):
//  - integer add/subtract/multiply/negate/abs wrap around (two's complement);
//  - integer divide truncates toward zero; x / 0 is -1 (signed) or the
//    maximum value (unsigned); INT_MIN / -1 is INT_MIN; x % 0 is x;
//    INT_MIN % -1 is 0 (XLA's definitions);
//  - integer power: exponentiation by squaring, wrapping; an exponent that is
//    negative read as signed gives 1 for base 1, else 0 (XLA);
//  - shifts by >= the bit width give 0 (logical) or the sign fill
//    (arithmetic); an arithmetic right shift reads the bits as signed, also
//    for unsigned types (XLA);
//  - on pred, add is or and multiply is and (XLA);
//  - convert float -> integer truncates toward zero, NaN gives 0, values out of
//    range clamp to the integer type's min/max; convert to pred is `x != 0`;
//    integer -> narrower integer wraps;
//  - maximum/minimum of floats propagate NaN;
//  - reduce combines elements in row-major order of the input, starting from
//    the init value (float sums may differ from XLA's CPU backend in the last
//    bits, which reduces in a different order);
//  - gather clamps start indices so the slice fits (XLA); scatter applies the
//    update windows in row-major order of the updates and skips a window that
//    does not fit in the operand;
//  - layouts (minor_to_major) in the module are ignored: every buffer is dense
//    and row-major in logical index order.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "npc/hlo.pb.h"  // generated from runtime/hlo/hlo.proto
#include "npc/result.h"
#include "npc/tensor.h"

namespace npc::host {

// Version of the generated code; part of the host compiler's identity in the
// cache. Bump when GenerateCpp's output for some module changes.
inline constexpr int kCodegenVersion = 2;

// Version of the artifact ABI below; npc_host_abi_version() returns it.
inline constexpr int kAbiVersion = 1;

// ---- ABI of a generated shared object -------------------------------------
//
// The .so exports exactly these C symbols:
//
//   extern "C" int npc_host_abi_version(void);      // == kAbiVersion
//   extern "C" const char* npc_host_signature(void);
//   extern "C" int npc_host_run(const void* const* inputs, void* const* outputs);
//
// npc_host_signature() returns a NUL-terminated JSON text:
//   {"abi_version":1,"codegen_version":1,"module":"<name>",
//    "parameters":[{"type":"f32","dims":[2,3]},...],
//    "outputs":[{"type":"s32","dims":[]},...]}
// where "type" is PrimitiveTypeName's lower-case name.
//
// Parameters: the entry computation's parameters in parameter_number order; a
// tuple-shaped parameter contributes its leaves, flattened depth-first.
// Outputs: the leaves of the entry root's shape, flattened depth-first (a
// non-tuple root is one output).
//
// npc_host_run: inputs[i] points to parameter i's buffer, outputs[j] to a
// caller-allocated buffer for output j. Every buffer is dense, row-major
// (logical index order; layouts are ignored), ElementCount * ElementSize
// bytes, aligned for its element type; PRED is one byte per element holding 0
// or 1. Output buffers must not overlap inputs. Returns 0 on success, nonzero
// when the run failed (out of memory). It keeps no state between calls and may
// be called from several threads at once.
//
// The generated source uses only the C++17 standard library.

// Generates the C++ translation unit of `module` (entry computation as found
// by npc::hlo::EntryComputation). Deterministic: the same module gives
// byte-identical source (no timestamps, pointers or random names).
// Errors: an unsupported opcode or element type, a malformed instruction
// (wrong operand count, bad dimension numbers, a literal whose value count
// does not match its shape), a reducer that is not a scalar computation.
// Messages look like
//   host backend: unsupported opcode 'cholesky' (instruction %cholesky.3 in computation main)
Result<std::string> GenerateCpp(const xla::HloModuleProto& module);

// Opcodes of `module` the host backend cannot compile, each with the message
// of its first failing instruction; custom-calls are keyed
// "custom-call:<target>", and a failure outside any instruction (a malformed
// computation) is keyed "". Every instruction reachable from the entry is
// checked (an instruction that fails stands in as an opaque value for its
// users). Empty when GenerateCpp accepts the module.
std::map<std::string, std::string> UnsupportedOpcodes(const xla::HloModuleProto& module);

// Every opcode the host backend compiles (and "custom-call:<target>" for the
// custom-calls it knows), sorted. Some have restrictions (see above), which
// UnsupportedOpcodes reports per module.
std::vector<std::string> SupportedOpcodes();

// Compiles the C++ file `source_path` into the shared object `output_path`:
//   <cxx> -std=c++17 -O2 -shared -fPIC -ffile-prefix-map=<dir>=. -frandom-seed=npc
//         -o <output_path> <basename of source_path>
// run in the source's directory, so that no temporary path is written into
// the .so (the same source compiled in two directories gives identical bytes).
// `cxx` is a program name or path, optionally followed by space-separated
// leading arguments (e.g. "ccache g++"). `log` (may be null) receives the
// command line and the compiler's output.
// Errors: the compiler cannot be started, exits nonzero (the error includes
// the tail of its output), or produces no output file.
Status CompileSharedObject(const std::string& cxx, const std::string& source_path,
                           const std::string& output_path, std::string* log);

// The C++ compiler npc was built with (CMake's CMAKE_CXX_COMPILER).
std::string DefaultCxx();

// One parameter or output of an artifact: element type and dims (row-major).
struct TensorSpec {
  xla::PrimitiveType type = xla::PRIMITIVE_TYPE_INVALID;
  std::vector<int64_t> dims;
  bool operator==(const TensorSpec& o) const { return type == o.type && dims == o.dims; }
};

// "f32[2,3]".
std::string TensorSpecToString(const TensorSpec& spec);

// A loaded artifact. Thread-safe: Run may be called concurrently.
class HostExecutable {
 public:
  // dlopen(so_path, RTLD_NOW | RTLD_LOCAL) and checks the ABI version and the
  // signature. Several different artifacts may be loaded in one process.
  // Note: the dynamic loader identifies a library by its path (and inode); an
  // artifact replaced in place while loaded is not reloaded until every
  // HostExecutable of it is destroyed.
  // Errors (naming the file): cannot be loaded, missing symbols, ABI version
  // mismatch, unparsable signature.
  static Result<std::unique_ptr<HostExecutable>> Load(const std::string& so_path);
  ~HostExecutable();
  HostExecutable(const HostExecutable&) = delete;
  HostExecutable& operator=(const HostExecutable&) = delete;

  // Runs the module on `args` (one per entry parameter leaf, see ABI above)
  // and returns the outputs (one per root leaf).
  // Errors: wrong number of arguments, an argument whose type, dims or byte
  // size differ from parameters()[i], the artifact reporting a failure.
  Result<std::vector<Tensor>> Run(const std::vector<Tensor>& args) const;

  const std::vector<TensorSpec>& parameters() const { return parameters_; }
  const std::vector<TensorSpec>& outputs() const { return outputs_; }
  const std::string& path() const { return path_; }
  const std::string& module_name() const { return module_name_; }

 private:
  HostExecutable() = default;
  using RunFn = int (*)(const void* const*, void* const*);
  std::string path_;
  std::string module_name_;
  void* handle_ = nullptr;
  RunFn run_ = nullptr;
  std::vector<TensorSpec> parameters_;
  std::vector<TensorSpec> outputs_;
};

}  // namespace npc::host
