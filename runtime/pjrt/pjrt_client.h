// A small client of XLA's PJRT C API (xla/pjrt/c/pjrt_c_api.h): load a plugin
// (a shared object exporting GetPjrtApi), create a client, compile a module,
// serialize the executable, deserialize-and-load it, run it on host buffers.
// Internal to npc (the pjrt backend, runtime/compilers/pjrt_compiler.h).
//
// Errors: every PJRT_Error becomes an npc Error whose message names the plugin
// file and the call ("<plugin>: PJRT_Client_Compile: <XLA's message>").
// Thread safety: a Client and its executables may be used from several threads
// (PJRT clients are thread-safe); Shared() is thread-safe.
// Plugins are never unloaded (dlclose of an XLA plugin is not supported), and
// clients returned by Shared() live until the process exits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "npc/result.h"
#include "npc/tensor.h"

struct PJRT_Api;
struct PJRT_Client;
struct PJRT_Device;
struct PJRT_LoadedExecutable;

namespace npc::pjrt {

// The PJRT C API version npc was built against (the header's PJRT_API_MAJOR/MINOR).
int HeaderApiMajor();
int HeaderApiMinor();

class LoadedExecutable;

class Client {
 public:
  // dlopen(plugin_path), GetPjrtApi(), PJRT_Plugin_Initialize, PJRT_Client_Create.
  // Errors: a missing or unloadable file, no GetPjrtApi symbol, an API major
  // version other than HeaderApiMajor() (the message names both), a client
  // that cannot be created.
  static Result<std::unique_ptr<Client>> Open(const std::string& plugin_path);
  // One client per plugin path per process, created on first use.
  static Result<Client*> Shared(const std::string& plugin_path);
  ~Client();

  const std::string& plugin_path() const { return plugin_path_; }
  const std::string& platform_name() const { return platform_name_; }        // "cpu", "cuda"
  const std::string& platform_version() const { return platform_version_; }  // as the plugin reports it
  // The plugin's "stablehlo_current_version" attribute ("1.13.3"); empty when it has none.
  const std::string& stablehlo_version() const { return stablehlo_version_; }
  int api_major() const { return api_major_; }
  int api_minor() const { return api_minor_; }
  // Seconds spent in dlopen + GetPjrtApi + initialize + client creation.
  double open_seconds() const { return open_seconds_; }

  // PJRT_Client_Compile of `code` (format "hlo": a serialized HloModuleProto;
  // "mlir": StableHLO bytecode or text) with `compile_options` (a serialized
  // CompileOptionsProto), then PJRT_Executable_Serialize: the serialized
  // executable's bytes. Errors: the module XLA rejects (XLA's text).
  Result<std::string> CompileAndSerialize(std::string_view code, std::string_view format,
                                          std::string_view compile_options) const;
  // PJRT_Executable_DeserializeAndLoad. Errors: bytes this plugin cannot load.
  Result<std::unique_ptr<LoadedExecutable>> DeserializeAndLoad(std::string_view serialized) const;

  // Internal: the error text of `error` (destroyed), prefixed with the plugin and the call.
  Error TakeError(void* error, std::string_view call) const;
  const PJRT_Api* api() const { return api_; }
  PJRT_Client* client() const { return client_; }
  PJRT_Device* device() const { return device_; }

 private:
  Client() = default;
  std::string plugin_path_;
  const PJRT_Api* api_ = nullptr;
  PJRT_Client* client_ = nullptr;
  PJRT_Device* device_ = nullptr;  // the first addressable device
  std::string platform_name_;
  std::string platform_version_;
  std::string stablehlo_version_;
  int api_major_ = 0;
  int api_minor_ = 0;
  double open_seconds_ = 0;
};

// An executable loaded on the client's first addressable device.
class LoadedExecutable {
 public:
  LoadedExecutable(const Client* client, PJRT_LoadedExecutable* exe) : client_(client), exe_(exe) {}
  ~LoadedExecutable();
  LoadedExecutable(const LoadedExecutable&) = delete;
  LoadedExecutable& operator=(const LoadedExecutable&) = delete;

  // Number of outputs (the leaves of a tuple result, else 1).
  Result<size_t> NumOutputs() const;
  // Copies the arguments to device buffers (BufferFromHostBuffer, row-major),
  // executes, and copies every output back (ToHostBuffer, row-major).
  // Errors: an element type PJRT has no buffer type for; execution errors.
  Result<std::vector<Tensor>> Execute(const std::vector<Tensor>& arguments) const;

 private:
  const Client* client_;
  PJRT_LoadedExecutable* exe_;
};

}  // namespace npc::pjrt
