// The C API (see npc/npc.h) over npc::Runtime. No C++ exception leaves an
// extern "C" function: each one catches everything and reports it as an error
// (or, for functions without an error channel, as the documented neutral
// value). NULL pointers are checked before use.
#include "npc/npc.h"

#include <cstring>
#include <exception>
#include <memory>
#include <new>

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

// Runs `body` (returning 0 or Fail's 1); an exception becomes an error naming
// the function.
template <class Fn>
int Guarded(const char* function, char* error, size_t error_size, Fn body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(std::string(function) + ": out of memory", error, error_size);
  } catch (const std::exception& e) {
    try {
      return Fail(std::string(function) + ": " + e.what(), error, error_size);
    } catch (...) {
      return 1;
    }
  } catch (...) {
    return Fail(std::string(function) + ": unknown C++ exception", error, error_size);
  }
}

int Shape(const std::vector<npc::TensorSpec>& specs, size_t index, int* element_type, int64_t* dims,
          size_t max_dims) {
  if (index >= specs.size()) return -1;
  const auto& spec = specs[index];
  if (element_type) *element_type = static_cast<int>(spec.type);
  for (size_t i = 0; dims && i < spec.dims.size() && i < max_dims; ++i) dims[i] = spec.dims[i];
  return static_cast<int>(spec.dims.size());
}

bool Usable(const npc_executable* e) { return e != nullptr && e->executable != nullptr; }

}  // namespace

extern "C" {

int npc_runtime_create(npc_runtime** out, char* error, size_t error_size) {
  return Guarded("npc_runtime_create", error, error_size, [&] {
    if (out == nullptr) return Fail("npc_runtime_create: out is NULL", error, error_size);
    *out = nullptr;
    auto rt = npc::Runtime::FromEnvironment();
    if (!rt) return Fail(rt.error().message, error, error_size);
    *out = new npc_runtime{std::move(*rt)};
    return 0;
  });
}

void npc_runtime_destroy(npc_runtime* runtime) {
  try {
    delete runtime;
  } catch (...) {
  }
}

void npc_runtime_counters(const npc_runtime* runtime, npc_counters* out) {
  if (out == nullptr) return;
  *out = npc_counters{0, 0, 0, 0, 0};
  if (runtime == nullptr || runtime->runtime == nullptr) return;
  try {
    npc::CacheCounters c = runtime->runtime->counters();
    *out = npc_counters{c.hits, c.misses, c.compiles, c.failed_compiles, c.extracted};
  } catch (...) {
  }
}

int npc_runtime_get_executable(npc_runtime* runtime, const void* hlo_bytes, size_t hlo_size, const char* graph_key,
                               npc_executable** out, char* error, size_t error_size) {
  return Guarded("npc_runtime_get_executable", error, error_size, [&] {
    if (out == nullptr) return Fail("npc_runtime_get_executable: out is NULL", error, error_size);
    *out = nullptr;
    if (runtime == nullptr || runtime->runtime == nullptr) {
      return Fail("npc_runtime_get_executable: runtime is NULL", error, error_size);
    }
    if (hlo_bytes == nullptr && hlo_size != 0) {
      return Fail("npc_runtime_get_executable: hlo_bytes is NULL", error, error_size);
    }
    const char* bytes = hlo_bytes != nullptr ? static_cast<const char*>(hlo_bytes) : "";
    auto exe = runtime->runtime->GetExecutableFromBytes(std::string_view(bytes, hlo_size), graph_key ? graph_key : "");
    if (!exe) return Fail(exe.error().message, error, error_size);
    *out = new npc_executable{std::move(*exe)};
    return 0;
  });
}

void npc_executable_destroy(npc_executable* executable) {
  try {
    delete executable;
  } catch (...) {
  }
}

size_t npc_executable_num_parameters(const npc_executable* e) {
  return Usable(e) ? e->executable->parameters().size() : 0;
}
size_t npc_executable_num_outputs(const npc_executable* e) { return Usable(e) ? e->executable->outputs().size() : 0; }

int npc_executable_parameter_shape(const npc_executable* e, size_t index, int* element_type, int64_t* dims,
                                   size_t max_dims) {
  return Usable(e) ? Shape(e->executable->parameters(), index, element_type, dims, max_dims) : -1;
}

int npc_executable_output_shape(const npc_executable* e, size_t index, int* element_type, int64_t* dims,
                                size_t max_dims) {
  return Usable(e) ? Shape(e->executable->outputs(), index, element_type, dims, max_dims) : -1;
}

int npc_executable_run(const npc_executable* e, const void* const* inputs, void* const* outputs, char* error,
                       size_t error_size) {
  return Guarded("npc_executable_run", error, error_size, [&] {
    if (!Usable(e)) return Fail("npc_executable_run: executable is NULL", error, error_size);
    const auto& params = e->executable->parameters();
    if (!params.empty() && inputs == nullptr) return Fail("npc_executable_run: inputs is NULL", error, error_size);
    if (!e->executable->outputs().empty() && outputs == nullptr) {
      return Fail("npc_executable_run: outputs is NULL", error, error_size);
    }
    std::vector<npc::Tensor> args;
    for (size_t i = 0; i < params.size(); ++i) {
      npc::Tensor t;
      t.type = params[i].type;
      t.dims = params[i].dims;
      size_t bytes = static_cast<size_t>(t.element_count() * npc::ElementSize(t.type));
      if (bytes != 0 && inputs[i] == nullptr) {
        return Fail("npc_executable_run: inputs[" + std::to_string(i) + "] is NULL", error, error_size);
      }
      t.bytes.resize(bytes);
      if (bytes) std::memcpy(t.bytes.data(), inputs[i], bytes);
      args.push_back(std::move(t));
    }
    for (size_t i = 0; i < e->executable->outputs().size(); ++i) {
      if (outputs[i] == nullptr) {
        return Fail("npc_executable_run: outputs[" + std::to_string(i) + "] is NULL", error, error_size);
      }
    }
    auto result = e->executable->Run(args);
    if (!result) return Fail(result.error().message, error, error_size);
    for (size_t i = 0; i < result->size() && i < e->executable->outputs().size(); ++i) {
      const auto& t = (*result)[i];
      if (!t.bytes.empty()) std::memcpy(outputs[i], t.bytes.data(), t.bytes.size());
    }
    return 0;
  });
}

}  // extern "C"
