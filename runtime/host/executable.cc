// Loading and running host artifacts (see host_backend.h).
#include <dlfcn.h>

#include <nlohmann/json.hpp>

#include "host/host_backend.h"

namespace npc::host {
namespace {

xla::PrimitiveType TypeFromName(const std::string& name) {
  for (int t = xla::PrimitiveType_MIN; t <= xla::PrimitiveType_MAX; ++t) {
    if (!xla::PrimitiveType_IsValid(t)) continue;
    auto type = static_cast<xla::PrimitiveType>(t);
    if (type != xla::PRIMITIVE_TYPE_INVALID && PrimitiveTypeName(type) == name) return type;
  }
  return xla::PRIMITIVE_TYPE_INVALID;
}

bool ParseSpecs(const nlohmann::json& list, std::vector<TensorSpec>* out) {
  if (!list.is_array()) return false;
  for (const auto& item : list) {
    if (!item.is_object() || !item.contains("type") || !item["type"].is_string() || !item.contains("dims") ||
        !item["dims"].is_array()) {
      return false;
    }
    TensorSpec spec;
    spec.type = TypeFromName(item["type"].get<std::string>());
    if (spec.type == xla::PRIMITIVE_TYPE_INVALID || ElementSize(spec.type) == 0) return false;
    for (const auto& d : item["dims"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) return false;
      spec.dims.push_back(d.get<int64_t>());
    }
    out->push_back(std::move(spec));
  }
  return true;
}

int64_t ByteSize(const TensorSpec& spec) {
  int64_t n = ElementSize(spec.type);
  for (int64_t d : spec.dims) n *= d;
  return n;
}

}  // namespace

std::string TensorSpecToString(const TensorSpec& spec) {
  std::string out = PrimitiveTypeName(spec.type) + "[";
  for (size_t i = 0; i < spec.dims.size(); ++i) out += (i ? "," : "") + std::to_string(spec.dims[i]);
  return out + "]";
}

Result<std::unique_ptr<HostExecutable>> HostExecutable::Load(const std::string& so_path) {
  auto fail = [&](const std::string& what) { return MakeError("host backend: " + so_path + ": " + what); };
  dlerror();
  void* handle = dlopen(so_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return fail(std::string("cannot load the artifact: ") + (why ? why : "unknown error"));
  }
  std::unique_ptr<HostExecutable> exe(new HostExecutable());
  exe->handle_ = handle;  // closed by the destructor from here on
  exe->path_ = so_path;
  auto abi = reinterpret_cast<int (*)()>(dlsym(handle, "npc_host_abi_version"));
  auto signature = reinterpret_cast<const char* (*)()>(dlsym(handle, "npc_host_signature"));
  exe->run_ = reinterpret_cast<RunFn>(dlsym(handle, "npc_host_run"));
  if (abi == nullptr || signature == nullptr || exe->run_ == nullptr) {
    return fail("not a host artifact (missing npc_host_abi_version, npc_host_signature or npc_host_run)");
  }
  if (int v = abi(); v != kAbiVersion) {
    return fail("artifact ABI version " + std::to_string(v) + ", this npc reads version " + std::to_string(kAbiVersion));
  }
  const char* text = signature();
  if (text == nullptr) return fail("npc_host_signature returned null");
  auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object() || !json.contains("parameters") || !json.contains("outputs") ||
      !ParseSpecs(json["parameters"], &exe->parameters_) || !ParseSpecs(json["outputs"], &exe->outputs_)) {
    return fail("unreadable signature: " + std::string(text).substr(0, 200));
  }
  if (json.contains("module") && json["module"].is_string()) exe->module_name_ = json["module"].get<std::string>();
  return exe;
}

HostExecutable::~HostExecutable() {
  if (handle_ != nullptr) dlclose(handle_);
}

Result<std::vector<Tensor>> HostExecutable::Run(const std::vector<Tensor>& args) const {
  auto fail = [&](const std::string& what) {
    return MakeError("host backend: module " + module_name_ + " (" + path_ + "): " + what);
  };
  if (args.size() != parameters_.size()) {
    return fail("expects " + std::to_string(parameters_.size()) + " arguments, got " + std::to_string(args.size()));
  }
  std::vector<const void*> inputs(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorSpec& want = parameters_[i];
    const TensorSpec got{args[i].type, args[i].dims};
    if (!(got == want)) {
      return fail("argument " + std::to_string(i) + " is " + TensorSpecToString(got) + ", expected " +
                  TensorSpecToString(want));
    }
    if (static_cast<int64_t>(args[i].bytes.size()) != ByteSize(want)) {
      return fail("argument " + std::to_string(i) + " (" + TensorSpecToString(want) + ") holds " +
                  std::to_string(args[i].bytes.size()) + " bytes, expected " + std::to_string(ByteSize(want)));
    }
    inputs[i] = args[i].bytes.data();
  }
  std::vector<Tensor> results;
  std::vector<void*> outputs;
  results.reserve(outputs_.size());
  for (const auto& spec : outputs_) {
    results.push_back(ZeroTensor(spec.type, spec.dims));
    outputs.push_back(results.back().bytes.data());
  }
  if (int rc = run_(inputs.data(), outputs.data()); rc != 0) {
    return fail("npc_host_run failed (status " + std::to_string(rc) + ", out of memory)");
  }
  return results;
}

}  // namespace npc::host
