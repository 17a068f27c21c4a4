// A tiny regression MLP built with npc::hlo::HloBuilder: three graphs.
//   normalize:  x f32[kBatch, kInputs] -> tuple(x * 0.5 - 0.25)
//   train step: w1 f32[kInputs, kHidden], w2 f32[kHidden, kOutputs],
//               x f32[kBatch, kInputs], y f32[kBatch, kOutputs], lr f32[]
//               -> tuple(w1', w2', loss f32[])   (relu hidden layer, mean squared error, SGD)
//   eval:       w1, w2, x f32[kEvalExamples, kInputs], y f32[kEvalExamples, kOutputs]
//               -> tuple(loss f32[])
#pragma once

#include "npc/hlo.pb.h"

namespace tiny {

npc::xla::HloModuleProto BuildNormalize();
npc::xla::HloModuleProto BuildTrainStep();
npc::xla::HloModuleProto BuildEval();

}  // namespace tiny
