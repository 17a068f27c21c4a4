// The C API (see npc/npc.h) over npc::Runtime.
#include "npc/npc.h"

#include <cstring>
#include <memory>

#include "npc/runtime.h"

struct npc_runtime {
  std::unique_ptr<npc::Runtime> runtime;
};

struct npc_executable {
  std::shared_ptr<npc::Executable> executable;
};

namespace {

int Fail(const std::string& message, char* error, size_t error_size) {
  if (error != nullptr && error_size > 0) {
    std::strncpy(error, message.c_str(), error_size - 1);
    error[error_size - 1] = '\0';
  }
  return 1;
}

int Shape(const std::vector<npc::TensorSpec>& specs, size_t index, int* element_type, int64_t* dims,
          size_t max_dims) {
  if (index >= specs.size()) return -1;
  const auto& spec = specs[index];
  if (element_type) *element_type = static_cast<int>(spec.type);
  for (size_t i = 0; dims && i < spec.dims.size() && i < max_dims; ++i) dims[i] = spec.dims[i];
  return static_cast<int>(spec.dims.size());
}

}  // namespace

extern "C" {

int npc_runtime_create(npc_runtime** out, char* error, size_t error_size) {
  auto rt = npc::Runtime::FromEnvironment();
  if (!rt) return Fail(rt.error().message, error, error_size);
  *out = new npc_runtime{std::move(*rt)};
  return 0;
}

void npc_runtime_destroy(npc_runtime* runtime) { delete runtime; }

void npc_runtime_counters(const npc_runtime* runtime, npc_counters* out) {
  npc::CacheCounters c = runtime->runtime->counters();
  *out = npc_counters{c.hits, c.misses, c.compiles, c.failed_compiles, c.extracted};
}

int npc_runtime_get_executable(npc_runtime* runtime, const void* hlo_bytes, size_t hlo_size, const char* graph_key,
                               npc_executable** out, char* error, size_t error_size) {
  auto exe = runtime->runtime->GetExecutableFromBytes(
      std::string_view(static_cast<const char*>(hlo_bytes), hlo_size), graph_key ? graph_key : "");
  if (!exe) return Fail(exe.error().message, error, error_size);
  *out = new npc_executable{std::move(*exe)};
  return 0;
}

void npc_executable_destroy(npc_executable* executable) { delete executable; }

size_t npc_executable_num_parameters(const npc_executable* e) { return e->executable->parameters().size(); }
size_t npc_executable_num_outputs(const npc_executable* e) { return e->executable->outputs().size(); }

int npc_executable_parameter_shape(const npc_executable* e, size_t index, int* element_type, int64_t* dims,
                                   size_t max_dims) {
  return Shape(e->executable->parameters(), index, element_type, dims, max_dims);
}

int npc_executable_output_shape(const npc_executable* e, size_t index, int* element_type, int64_t* dims,
                                size_t max_dims) {
  return Shape(e->executable->outputs(), index, element_type, dims, max_dims);
}

int npc_executable_run(const npc_executable* e, const void* const* inputs, void* const* outputs, char* error,
                       size_t error_size) {
  const auto& params = e->executable->parameters();
  std::vector<npc::Tensor> args;
  for (size_t i = 0; i < params.size(); ++i) {
    npc::Tensor t;
    t.type = params[i].type;
    t.dims = params[i].dims;
    size_t bytes = static_cast<size_t>(t.element_count() * npc::ElementSize(t.type));
    t.bytes.resize(bytes);
    if (bytes) std::memcpy(t.bytes.data(), inputs[i], bytes);
    args.push_back(std::move(t));
  }
  auto result = e->executable->Run(args);
  if (!result) return Fail(result.error().message, error, error_size);
  for (size_t i = 0; i < result->size(); ++i) {
    const auto& t = (*result)[i];
    if (!t.bytes.empty()) std::memcpy(outputs[i], t.bytes.data(), t.bytes.size());
  }
  return 0;
}

}  // extern "C"
