// A small builder of HLO modules (HloModuleProto), for programs that make
// their own graphs (samples/mlp_train) and for tests.
//
// Usage:
//   npc::hlo::HloBuilder b("train_step");
//   auto x = b.Parameter(0, F32, {32, 784}, "x");
//   auto w = b.Parameter(1, F32, {784, 10}, "w");
//   auto y = b.Dot(x, w, /*lhs_contracting=*/{1}, /*rhs_contracting=*/{0});
//   xla::HloModuleProto m = b.Build(b.Tuple({y}));
//
// Shapes are inferred the way XLA infers them; a call with operands whose
// shapes do not fit (e.g. add of f32[2] and f32[3]) aborts with a message,
// since that is a programming error in the caller. Layouts are row-major
// ({n-1,...,0}). Instruction ids are assigned in creation order; names are
// "<opcode>.<id>" unless given.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "npc/hlo.pb.h"  // generated from runtime/hlo/hlo.proto

namespace npc::hlo {

// A handle to an instruction of the computation being built.
struct Op {
  int64_t id = -1;
  xla::ShapeProto shape;
};

class HloBuilder {
 public:
  explicit HloBuilder(std::string name);
  ~HloBuilder();
  HloBuilder(const HloBuilder&) = delete;
  HloBuilder& operator=(const HloBuilder&) = delete;

  // Shapes.
  static xla::ShapeProto ArrayShape(xla::PrimitiveType type, const std::vector<int64_t>& dims);
  static xla::ShapeProto TupleShape(const std::vector<xla::ShapeProto>& elements);

  Op Parameter(int64_t number, xla::PrimitiveType type, const std::vector<int64_t>& dims,
               const std::string& name = "");
  Op ParameterWithShape(int64_t number, const xla::ShapeProto& shape, const std::string& name = "");

  // Constants. Scalar forms take the value; array forms take row-major values.
  Op ConstantF32(float value);
  Op ConstantS32(int32_t value);
  Op ConstantS64(int64_t value);
  Op ConstantPred(bool value);
  Op ConstantF32Array(const std::vector<int64_t>& dims, const std::vector<float>& values);
  Op ConstantS32Array(const std::vector<int64_t>& dims, const std::vector<int32_t>& values);

  // Shape changes.
  Op Broadcast(Op operand, const std::vector<int64_t>& out_dims,
               const std::vector<int64_t>& broadcast_dimensions);
  Op Reshape(Op operand, const std::vector<int64_t>& out_dims);
  Op Transpose(Op operand, const std::vector<int64_t>& permutation);
  Op Slice(Op operand, const std::vector<int64_t>& start, const std::vector<int64_t>& limit,
           const std::vector<int64_t>& stride);
  Op Concatenate(const std::vector<Op>& operands, int64_t dimension);
  Op Iota(xla::PrimitiveType type, const std::vector<int64_t>& dims, int64_t iota_dimension);
  Op Convert(Op operand, xla::PrimitiveType type);

  // dot with dimension numbers: result dims = batch, lhs free, rhs free.
  Op Dot(Op lhs, Op rhs, const std::vector<int64_t>& lhs_contracting,
         const std::vector<int64_t>& rhs_contracting,
         const std::vector<int64_t>& lhs_batch = {}, const std::vector<int64_t>& rhs_batch = {});

  // Elementwise. Binary operands must have equal shapes (no implicit broadcast).
  Op Unary(const std::string& opcode, Op operand);  // negate, exponential, log, tanh, sqrt, rsqrt, ...
  Op Binary(const std::string& opcode, Op lhs, Op rhs);  // add, subtract, multiply, divide, maximum, minimum, power
  Op Add(Op a, Op b) { return Binary("add", a, b); }
  Op Sub(Op a, Op b) { return Binary("subtract", a, b); }
  Op Mul(Op a, Op b) { return Binary("multiply", a, b); }
  Op Div(Op a, Op b) { return Binary("divide", a, b); }
  Op Max(Op a, Op b) { return Binary("maximum", a, b); }
  Op Neg(Op a) { return Unary("negate", a); }
  Op Exp(Op a) { return Unary("exponential", a); }
  Op Log(Op a) { return Unary("log", a); }
  // direction: EQ, NE, LT, LE, GT, GE. Result is pred with the operands' dims.
  Op Compare(Op lhs, Op rhs, const std::string& direction);
  Op Select(Op pred, Op on_true, Op on_false);

  // reduce over `dimensions` with a reducer computation made by MakeReducer
  // (or any scalar computation (T, T) -> T built with a sub-builder).
  Op Reduce(Op operand, Op init, const std::vector<int64_t>& dimensions, int64_t reducer_id);
  // Adds a scalar reducer computation "<opcode>(a, b)" for `type` and returns its id.
  int64_t MakeReducer(const std::string& opcode, xla::PrimitiveType type);
  // Adds a computation built by `sub` (its root is `root`) and returns its id; for
  // reduce reducers and call targets.
  int64_t AddComputation(HloBuilder& sub, Op root);
  Op Call(const std::vector<Op>& operands, int64_t computation_id, const xla::ShapeProto& result);

  Op Tuple(const std::vector<Op>& elements);
  Op GetTupleElement(Op tuple, int64_t index);

  // Appends any instruction; its id, operand ids and shape are filled in.
  // For ops the helpers above do not cover (and for tests of unsupported ops).
  Op AddInstruction(xla::HloInstructionProto instruction, const std::vector<Op>& operands,
                    const xla::ShapeProto& shape);

  // Finishes the module: the entry computation's root is `root`. The builder
  // may not be used afterwards.
  xla::HloModuleProto Build(Op root);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace npc::hlo
