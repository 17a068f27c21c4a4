// The PJRT C API client (see pjrt_client.h).
#include "pjrt/pjrt_client.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <map>
#include <mutex>

#include "pjrt_c_api.h"  // from NPC_PJRT_INCLUDE_DIR (the plugin wheel's header; see scripts/install-pjrt.sh)

namespace npc::pjrt {
namespace {

// A zero-initialized argument struct with its struct_size set.
template <class T>
T MakeArgs(size_t struct_size) {
  T args{};
  args.struct_size = struct_size;
  return args;
}
#define NPC_PJRT_ARGS(T) MakeArgs<T>(T##_STRUCT_SIZE)

struct TypePair {
  xla::PrimitiveType npc;
  PJRT_Buffer_Type pjrt;
};
constexpr TypePair kTypes[] = {
    {xla::PRED, PJRT_Buffer_Type_PRED}, {xla::S8, PJRT_Buffer_Type_S8},     {xla::S16, PJRT_Buffer_Type_S16},
    {xla::S32, PJRT_Buffer_Type_S32},   {xla::S64, PJRT_Buffer_Type_S64},   {xla::U8, PJRT_Buffer_Type_U8},
    {xla::U16, PJRT_Buffer_Type_U16},   {xla::U32, PJRT_Buffer_Type_U32},   {xla::U64, PJRT_Buffer_Type_U64},
    {xla::F16, PJRT_Buffer_Type_F16},   {xla::F32, PJRT_Buffer_Type_F32},   {xla::F64, PJRT_Buffer_Type_F64},
    {xla::BF16, PJRT_Buffer_Type_BF16}, {xla::C64, PJRT_Buffer_Type_C64},   {xla::C128, PJRT_Buffer_Type_C128},
};

PJRT_Buffer_Type ToPjrtType(xla::PrimitiveType type) {
  for (const auto& p : kTypes) {
    if (p.npc == type) return p.pjrt;
  }
  return PJRT_Buffer_Type_INVALID;
}

xla::PrimitiveType FromPjrtType(PJRT_Buffer_Type type) {
  for (const auto& p : kTypes) {
    if (p.pjrt == type) return p.npc;
  }
  return xla::PRIMITIVE_TYPE_INVALID;
}

// Owns a PJRT_Buffer.
class Buffer {
 public:
  Buffer(const PJRT_Api* api, PJRT_Buffer* buffer) : api_(api), buffer_(buffer) {}
  Buffer(Buffer&& o) noexcept : api_(o.api_), buffer_(o.buffer_) { o.buffer_ = nullptr; }
  Buffer(const Buffer&) = delete;
  ~Buffer() {
    if (!buffer_) return;
    auto args = NPC_PJRT_ARGS(PJRT_Buffer_Destroy_Args);
    args.buffer = buffer_;
    if (PJRT_Error* e = api_->PJRT_Buffer_Destroy(&args)) {
      auto d = NPC_PJRT_ARGS(PJRT_Error_Destroy_Args);
      d.error = e;
      api_->PJRT_Error_Destroy(&d);
    }
  }
  PJRT_Buffer* get() const { return buffer_; }

 private:
  const PJRT_Api* api_;
  PJRT_Buffer* buffer_;
};

// Waits for `event` and destroys it; the event's error, if any.
PJRT_Error* AwaitAndDestroy(const PJRT_Api* api, PJRT_Event* event) {
  if (!event) return nullptr;
  auto await = NPC_PJRT_ARGS(PJRT_Event_Await_Args);
  await.event = event;
  PJRT_Error* error = api->PJRT_Event_Await(&await);
  auto destroy = NPC_PJRT_ARGS(PJRT_Event_Destroy_Args);
  destroy.event = event;
  if (PJRT_Error* e = api->PJRT_Event_Destroy(&destroy)) {
    auto d = NPC_PJRT_ARGS(PJRT_Error_Destroy_Args);
    d.error = e;
    api->PJRT_Error_Destroy(&d);
  }
  return error;
}

// The row-major (descending minor-to-major) layout of a rank-`rank` array.
struct RowMajorLayout {
  explicit RowMajorLayout(size_t rank) {
    for (size_t i = 0; i < rank; ++i) minor_to_major.push_back(static_cast<int64_t>(rank - 1 - i));
    layout = NPC_PJRT_ARGS(PJRT_Buffer_MemoryLayout);
    layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
    layout.tiled = NPC_PJRT_ARGS(PJRT_Buffer_MemoryLayout_Tiled);
    layout.tiled.minor_to_major = minor_to_major.data();
    layout.tiled.minor_to_major_size = minor_to_major.size();
  }
  std::vector<int64_t> minor_to_major;
  PJRT_Buffer_MemoryLayout layout;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int HeaderApiMajor() { return PJRT_API_MAJOR; }
int HeaderApiMinor() { return PJRT_API_MINOR; }

Error Client::TakeError(void* raw, std::string_view call) const {
  auto* error = static_cast<PJRT_Error*>(raw);
  auto message = NPC_PJRT_ARGS(PJRT_Error_Message_Args);
  message.error = error;
  api_->PJRT_Error_Message(&message);
  std::string text(message.message, message.message_size);
  auto destroy = NPC_PJRT_ARGS(PJRT_Error_Destroy_Args);
  destroy.error = error;
  api_->PJRT_Error_Destroy(&destroy);
  return MakeError("PJRT plugin " + plugin_path_ + ": " + std::string(call) + ": " + text);
}

Result<std::unique_ptr<Client>> Client::Open(const std::string& plugin_path) {
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Client> c(new Client());
  c->plugin_path_ = plugin_path;
  struct stat st;
  if (::stat(plugin_path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return MakeError("PJRT plugin " + plugin_path + ": no such file (set NPC_PJRT_PLUGIN to XLA's PJRT plugin, "
                     "or run scripts/install-deps.sh --pjrt)");
  }
  void* handle = dlopen(plugin_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return MakeError("PJRT plugin " + plugin_path + ": cannot load: " + dlerror());
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(dlsym(handle, "GetPjrtApi"));
  if (!get_api) {
    return MakeError("PJRT plugin " + plugin_path + ": not a PJRT plugin (no GetPjrtApi symbol)");
  }
  c->api_ = get_api();
  if (!c->api_) return MakeError("PJRT plugin " + plugin_path + ": GetPjrtApi returned null");
  c->api_major_ = c->api_->pjrt_api_version.major_version;
  c->api_minor_ = c->api_->pjrt_api_version.minor_version;
  if (c->api_major_ != PJRT_API_MAJOR) {
    return MakeError("PJRT plugin " + plugin_path + ": PJRT C API version " + std::to_string(c->api_major_) + "." +
                     std::to_string(c->api_minor_) + ", npc was built for major version " +
                     std::to_string(PJRT_API_MAJOR) + " (" + std::to_string(PJRT_API_MAJOR) + "." +
                     std::to_string(PJRT_API_MINOR) + "): use a plugin of API major version " +
                     std::to_string(PJRT_API_MAJOR));
  }
  if (c->api_->PJRT_Plugin_Initialize) {
    auto init = NPC_PJRT_ARGS(PJRT_Plugin_Initialize_Args);
    if (PJRT_Error* e = c->api_->PJRT_Plugin_Initialize(&init)) return c->TakeError(e, "PJRT_Plugin_Initialize");
  }
  if (c->api_->PJRT_Plugin_Attributes) {
    auto attrs = NPC_PJRT_ARGS(PJRT_Plugin_Attributes_Args);
    if (PJRT_Error* e = c->api_->PJRT_Plugin_Attributes(&attrs)) return c->TakeError(e, "PJRT_Plugin_Attributes");
    for (size_t i = 0; i < attrs.num_attributes; ++i) {
      const PJRT_NamedValue& v = attrs.attributes[i];
      if (std::string_view(v.name, v.name_size) != "stablehlo_current_version") continue;
      if (v.type != PJRT_NamedValue_kInt64List) continue;
      for (size_t j = 0; j < v.value_size; ++j) {
        c->stablehlo_version_ += (j ? "." : "") + std::to_string(v.int64_array_value[j]);
      }
    }
  }
  auto create = NPC_PJRT_ARGS(PJRT_Client_Create_Args);
  if (PJRT_Error* e = c->api_->PJRT_Client_Create(&create)) return c->TakeError(e, "PJRT_Client_Create");
  c->client_ = create.client;

  auto name = NPC_PJRT_ARGS(PJRT_Client_PlatformName_Args);
  name.client = c->client_;
  if (PJRT_Error* e = c->api_->PJRT_Client_PlatformName(&name)) return c->TakeError(e, "PJRT_Client_PlatformName");
  c->platform_name_.assign(name.platform_name, name.platform_name_size);
  auto version = NPC_PJRT_ARGS(PJRT_Client_PlatformVersion_Args);
  version.client = c->client_;
  if (PJRT_Error* e = c->api_->PJRT_Client_PlatformVersion(&version)) {
    return c->TakeError(e, "PJRT_Client_PlatformVersion");
  }
  c->platform_version_.assign(version.platform_version, version.platform_version_size);
  auto devices = NPC_PJRT_ARGS(PJRT_Client_AddressableDevices_Args);
  devices.client = c->client_;
  if (PJRT_Error* e = c->api_->PJRT_Client_AddressableDevices(&devices)) {
    return c->TakeError(e, "PJRT_Client_AddressableDevices");
  }
  if (devices.num_addressable_devices == 0) return MakeError("PJRT plugin " + plugin_path + ": no addressable device");
  c->device_ = devices.addressable_devices[0];
  c->open_seconds_ = SecondsSince(start);
  return c;
}

Result<Client*> Client::Shared(const std::string& plugin_path) {
  static std::mutex mu;
  static auto* clients = new std::map<std::string, Client*>();  // never destroyed (see header)
  std::lock_guard<std::mutex> lock(mu);
  auto it = clients->find(plugin_path);
  if (it != clients->end()) return it->second;
  auto client = Open(plugin_path);
  if (!client) return client.error();
  Client* raw = client->release();
  (*clients)[plugin_path] = raw;
  return raw;
}

Client::~Client() {
  if (!client_) return;
  auto args = NPC_PJRT_ARGS(PJRT_Client_Destroy_Args);
  args.client = client_;
  if (PJRT_Error* e = api_->PJRT_Client_Destroy(&args)) (void)TakeError(e, "PJRT_Client_Destroy");
}

Result<std::string> Client::CompileAndSerialize(std::string_view code, std::string_view format,
                                                std::string_view compile_options) const {
  std::string code_copy(code);  // PJRT_Program.code is not const
  auto program = NPC_PJRT_ARGS(PJRT_Program);
  program.code = code_copy.data();
  program.code_size = code_copy.size();
  program.format = format.data();
  program.format_size = format.size();
  auto compile = NPC_PJRT_ARGS(PJRT_Client_Compile_Args);
  compile.client = client_;
  compile.program = &program;
  compile.compile_options = compile_options.data();
  compile.compile_options_size = compile_options.size();
  if (PJRT_Error* e = api_->PJRT_Client_Compile(&compile)) return TakeError(e, "PJRT_Client_Compile");
  LoadedExecutable loaded(this, compile.executable);  // destroyed on return

  auto get = NPC_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = compile.executable;
  if (PJRT_Error* e = api_->PJRT_LoadedExecutable_GetExecutable(&get)) {
    return TakeError(e, "PJRT_LoadedExecutable_GetExecutable");
  }
  auto serialize = NPC_PJRT_ARGS(PJRT_Executable_Serialize_Args);
  serialize.executable = get.executable;
  PJRT_Error* error = api_->PJRT_Executable_Serialize(&serialize);
  std::string bytes;
  if (!error) {
    bytes.assign(serialize.serialized_bytes, serialize.serialized_bytes_size);
    if (serialize.serialized_executable_deleter) serialize.serialized_executable_deleter(serialize.serialized_executable);
  }
  auto destroy = NPC_PJRT_ARGS(PJRT_Executable_Destroy_Args);
  destroy.executable = get.executable;
  if (PJRT_Error* e = api_->PJRT_Executable_Destroy(&destroy)) (void)TakeError(e, "PJRT_Executable_Destroy");
  if (error) return TakeError(error, "PJRT_Executable_Serialize");
  return bytes;
}

Result<std::unique_ptr<LoadedExecutable>> Client::DeserializeAndLoad(std::string_view serialized) const {
  auto args = NPC_PJRT_ARGS(PJRT_Executable_DeserializeAndLoad_Args);
  args.client = client_;
  args.serialized_executable = serialized.data();
  args.serialized_executable_size = serialized.size();
  if (PJRT_Error* e = api_->PJRT_Executable_DeserializeAndLoad(&args)) {
    return TakeError(e, "PJRT_Executable_DeserializeAndLoad");
  }
  return std::make_unique<LoadedExecutable>(this, args.loaded_executable);
}

LoadedExecutable::~LoadedExecutable() {
  if (!exe_) return;
  auto args = NPC_PJRT_ARGS(PJRT_LoadedExecutable_Destroy_Args);
  args.executable = exe_;
  if (PJRT_Error* e = client_->api()->PJRT_LoadedExecutable_Destroy(&args)) {
    (void)client_->TakeError(e, "PJRT_LoadedExecutable_Destroy");
  }
}

Result<size_t> LoadedExecutable::NumOutputs() const {
  const PJRT_Api* api = client_->api();
  auto get = NPC_PJRT_ARGS(PJRT_LoadedExecutable_GetExecutable_Args);
  get.loaded_executable = exe_;
  if (PJRT_Error* e = api->PJRT_LoadedExecutable_GetExecutable(&get)) {
    return client_->TakeError(e, "PJRT_LoadedExecutable_GetExecutable");
  }
  auto num = NPC_PJRT_ARGS(PJRT_Executable_NumOutputs_Args);
  num.executable = get.executable;
  PJRT_Error* error = api->PJRT_Executable_NumOutputs(&num);
  auto destroy = NPC_PJRT_ARGS(PJRT_Executable_Destroy_Args);
  destroy.executable = get.executable;
  if (PJRT_Error* e = api->PJRT_Executable_Destroy(&destroy)) (void)client_->TakeError(e, "PJRT_Executable_Destroy");
  if (error) return client_->TakeError(error, "PJRT_Executable_NumOutputs");
  return num.num_outputs;
}

namespace {

Result<Buffer> ToDevice(const Client& client, const Tensor& tensor, size_t index) {
  const PJRT_Api* api = client.api();
  PJRT_Buffer_Type type = ToPjrtType(tensor.type);
  if (type == PJRT_Buffer_Type_INVALID) {
    return MakeError("PJRT plugin " + client.plugin_path() + ": argument " + std::to_string(index) +
                     ": element type " + PrimitiveTypeName(tensor.type) + " has no PJRT buffer type");
  }
  auto args = NPC_PJRT_ARGS(PJRT_Client_BufferFromHostBuffer_Args);
  args.client = client.client();
  args.data = tensor.bytes.data();
  args.type = type;
  args.dims = tensor.dims.data();
  args.num_dims = tensor.dims.size();
  args.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  args.device = client.device();
  if (PJRT_Error* e = api->PJRT_Client_BufferFromHostBuffer(&args)) {
    return client.TakeError(e, "PJRT_Client_BufferFromHostBuffer");
  }
  Buffer buffer(api, args.buffer);
  if (PJRT_Error* e = AwaitAndDestroy(api, args.done_with_host_buffer)) {
    return client.TakeError(e, "PJRT_Client_BufferFromHostBuffer (transfer)");
  }
  return buffer;
}

Result<Tensor> ToHost(const Client& client, PJRT_Buffer* buffer) {
  const PJRT_Api* api = client.api();
  Tensor out;
  auto type = NPC_PJRT_ARGS(PJRT_Buffer_ElementType_Args);
  type.buffer = buffer;
  if (PJRT_Error* e = api->PJRT_Buffer_ElementType(&type)) return client.TakeError(e, "PJRT_Buffer_ElementType");
  out.type = FromPjrtType(type.type);
  if (out.type == xla::PRIMITIVE_TYPE_INVALID) {
    return MakeError("PJRT plugin " + client.plugin_path() + ": an output of PJRT buffer type " +
                     std::to_string(static_cast<int>(type.type)) + " that npc does not store");
  }
  auto dims = NPC_PJRT_ARGS(PJRT_Buffer_Dimensions_Args);
  dims.buffer = buffer;
  if (PJRT_Error* e = api->PJRT_Buffer_Dimensions(&dims)) return client.TakeError(e, "PJRT_Buffer_Dimensions");
  out.dims.assign(dims.dims, dims.dims + dims.num_dims);
  out.bytes.resize(static_cast<size_t>(out.element_count() * ElementSize(out.type)));
  RowMajorLayout layout(out.dims.size());
  auto copy = NPC_PJRT_ARGS(PJRT_Buffer_ToHostBuffer_Args);
  copy.src = buffer;
  copy.host_layout = &layout.layout;
  copy.dst = out.bytes.data();
  copy.dst_size = out.bytes.size();
  if (PJRT_Error* e = api->PJRT_Buffer_ToHostBuffer(&copy)) return client.TakeError(e, "PJRT_Buffer_ToHostBuffer");
  if (PJRT_Error* e = AwaitAndDestroy(api, copy.event)) return client.TakeError(e, "PJRT_Buffer_ToHostBuffer (transfer)");
  return out;
}

}  // namespace

Result<std::vector<Tensor>> LoadedExecutable::Execute(const std::vector<Tensor>& arguments) const {
  const PJRT_Api* api = client_->api();
  auto num_outputs = NumOutputs();
  if (!num_outputs) return num_outputs.error();
  std::vector<Buffer> inputs;
  std::vector<PJRT_Buffer*> input_ptrs;
  for (size_t i = 0; i < arguments.size(); ++i) {
    auto buffer = ToDevice(*client_, arguments[i], i);
    if (!buffer) return buffer.error();
    input_ptrs.push_back(buffer->get());
    inputs.push_back(std::move(*buffer));
  }
  std::vector<PJRT_Buffer*> output_ptrs(*num_outputs, nullptr);
  PJRT_Buffer* const* argument_lists[1] = {input_ptrs.data()};
  PJRT_Buffer** output_lists[1] = {output_ptrs.data()};
  PJRT_Event* complete[1] = {nullptr};
  auto options = NPC_PJRT_ARGS(PJRT_ExecuteOptions);
  auto args = NPC_PJRT_ARGS(PJRT_LoadedExecutable_Execute_Args);
  args.executable = exe_;
  args.options = &options;
  args.argument_lists = argument_lists;
  args.num_devices = 1;
  args.num_args = input_ptrs.size();
  args.output_lists = output_lists;
  args.device_complete_events = complete;
  if (PJRT_Error* e = api->PJRT_LoadedExecutable_Execute(&args)) {
    return client_->TakeError(e, "PJRT_LoadedExecutable_Execute");
  }
  std::vector<Buffer> outputs;
  for (PJRT_Buffer* b : output_ptrs) outputs.emplace_back(api, b);
  if (PJRT_Error* e = AwaitAndDestroy(api, complete[0])) return client_->TakeError(e, "PJRT_LoadedExecutable_Execute (run)");
  std::vector<Tensor> result;
  for (const Buffer& b : outputs) {
    auto tensor = ToHost(*client_, b.get());
    if (!tensor) return tensor.error();
    result.push_back(std::move(*tensor));
  }
  return result;
}

}  // namespace npc::pjrt
