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
//   count-leading-zeros, while, rng-bit-generator, batch-norm-training,
//   batch-norm-inference, batch-norm-grad, the collectives all-reduce
//   all-gather reduce-scatter (one participant), and the custom-calls
//   AwsNeuronTransferWithStaticRing, AwsNeuronGelu, AwsNeuronGeluBackward,
//   AwsNeuronSoftmax and AwsNeuronSoftmaxBackward (below).
// Anything else (other custom-calls, conditional, sort, reduce-window,
// convolution, collectives over several replicas, rng-bit-generator
// with ThreeFry, ...) makes GenerateCpp fail with an Error naming the opcode
// (and a custom-call's target), the instruction and the computation. Only
// instructions reachable from a computation's root are compiled (dead code is
// ignored). A constant whose values were elided in the HLO text it was read
// from (`constant({...})`, marked by the text reader's attribute
// npc_elided_constant) fails the compile, naming the constant: its values are
// unknown and are never made up (nor taken as extra inputs).
//
// The ops added for real torch-neuronx / JAX graphs, and where their
// definitions come from:
//  - AwsNeuronTransferWithStaticRing (torch-neuronx's transfer hint on
//    weights) is the identity on its operand.
//  - while (body and condition computations, XLA's called_computation_ids
//    order {body, condition}; the state may be a tuple): runs the body while
//    the condition returns true; no iteration limit.
//  - rng-bit-generator(state) -> (new state, bits): XLA's Philox bit generator
//    (xla/hlo/builder/lib/prng.cc, selected by XLA's RngBitGeneratorExpander):
//    Philox4x32-10 (Salmon et al., SC 2011; Random123's known-answer vectors
//    hold) with the 64-bit key state[0] and a 128-bit counter: for state
//    u64[3], low word state[1], high word state[2]; for state u64[2], low word
//    state[1] and high word state[0] (XLA reverses the two-word state). Block
//    j is Philox of counter + j; 32-bit (and narrower: their low bits) results
//    take the block's four words in order, 64-bit results two words each (low
//    word first); the new state is {key, counter + blocks} (u64[2]: the low
//    word only). algorithm rng_philox and rng_default (which XLA's CPU and GPU
//    backends also expand to Philox; on Trainium rng_default is the Neuron
//    compiler's choice, so bits differ from a device run) are accepted;
//    rng_three_fry fails the compile. Bits are integers (s8..s64, u8..u64).
//  - batch-norm-training (x, scale, offset) -> (y, mean, variance),
//    batch-norm-inference (x, scale, offset, mean, variance) -> y,
//    batch-norm-grad (x, scale, mean, variance, grad_y) -> (grad_x,
//    grad_scale, grad_offset): XLA's operation semantics (torch-xla emits
//    them for layer norm). Per feature l (dimension feature_index), over the
//    m elements of the other dimensions in row-major order, in the compute
//    type, each result rounded once: mean = sum(x)/m, variance =
//    sum((x-mean)^2)/m (biased, two passes), y = scale*(x-mean)/sqrt(variance
//    + epsilon) + offset; d = sum(gy)/m, c = sum(gy*(x-mean))/(variance +
//    epsilon)/m, grad_x = scale/sqrt(variance+epsilon) * (gy - d -
//    c*(x-mean)), grad_scale = sum(gy*(x-mean))/sqrt(variance+epsilon),
//    grad_offset = sum(gy). (XLA's CPU backend expands these differently, e.g.
//    variance as E[x^2] - E[x]^2, so its last bits may differ.)
//  - all-reduce, all-gather, reduce-scatter: the host backend runs one
//    replica. A collective is compiled when it has one participant: every
//    replica group has at most one member, or there are no groups (which in
//    XLA means all replicas, i.e. this one); it is then the identity on each
//    operand. A group with more members (e.g. replica_groups={{0,1}}) fails the
//    compile, naming the count. (collective-permute and all-to-all do not occur
//    in the corpus and are not compiled.)
//  - AwsNeuronGelu(x) = x * Phi(x) = x/2 * (1 + erf(x/sqrt(2))), the exact GELU,
//    and AwsNeuronGeluBackward(x) = dGELU/dx = Phi(x) + x * phi(x), each with
//    one operand and the operand's shape, floating point. Evidence: (a) the
//    backward call in the corpus (bert__bert_single_graph_4.hlo,
//    %custom-call.101) takes only x (the forward's input, %add.834) and its
//    result is multiplied by the incoming gradient in the same graph
//    (%multiply.6, op_name xla___op_GeluBackwardImpl), so it is the derivative,
//    not grad * derivative; (b) the Neuron compiler knows a separate target
//    for the tanh approximation, AwsNeuronGeluApprxTanh (its documented list
//    of recognised custom-call targets, error NCC_EVRF015), as NKI has gelu and
//    gelu_apprx_tanh; (c) the BERT graphs come from torch's default
//    F.gelu(approximate='none'). Caveat: transformers-neuronx's gelu_new (the
//    tanh approximation in Hugging Face) also emits AwsNeuronGelu, so a device
//    may differ from this by the approximation's error (< 1e-3 absolute).
//  - AwsNeuronSoftmax(x) = exp(x - max_d x) / sum_d exp(x - max_d x) and
//    AwsNeuronSoftmaxBackward(y, dy) = y * (dy - sum_d(dy * y)), where y is the
//    forward's output and dy the incoming gradient, d the dimension given as
//    the backend_config, a bare decimal number ("2"); floating point, result
//    and operands of one shape; a missing or out-of-range dimension fails the
//    compile. No corpus graph uses them (torch-xla lowers softmax to plain
//    HLO there); the definition follows the producers: transformers-neuronx
//    writes AwsNeuronSoftmax(logits) with backend_config=str(dim), and the
//    Neuron compiler's softmax passes raise exactly exp/max/sum/divide (and the
//    gradient y*(dy - sum(dy*y))) into these calls, operands {y, dy}. Max and
//    sums run over the dimension in index order, in the compute type (f32 for
//    bf16/f16), rounded once.
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
inline constexpr int kCodegenVersion = 4;

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
