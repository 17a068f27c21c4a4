# libFuzzer targets (NPC_BUILD_FUZZERS=ON, clang only), included from
# runtime/CMakeLists.txt so that they can use the generated hlo.pb.cc. They
# compile only the sources they need (readers, validation, canonical key, host
# code generation), instrumented with libFuzzer, AddressSanitizer and
# UndefinedBehaviorSanitizer. scripts/fuzz.sh builds and runs them.
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "NPC_BUILD_FUZZERS needs clang (e.g. -DCMAKE_CXX_COMPILER=clang++)")
endif()
set(NPC_FUZZ_SANITIZERS -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
add_library(npc_fuzz_core STATIC
  ${NPC_HLO_PROTO_SRCS}
  hlo/hlo_module.cc hlo/op_checks.cc hlo/text_reader.cc hlo/canonical_key.cc
  host/codegen.cc host/prelude.cc host/tensor.cc)
target_include_directories(npc_fuzz_core PUBLIC
  ${CMAKE_CURRENT_SOURCE_DIR}/include ${NPC_GEN_DIR} ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(npc_fuzz_core PUBLIC protobuf::libprotobuf OpenSSL::Crypto ZLIB::ZLIB Threads::Threads)
target_compile_definitions(npc_fuzz_core PUBLIC FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
target_compile_options(npc_fuzz_core PUBLIC ${NPC_FUZZ_SANITIZERS} -fsanitize=fuzzer-no-link)
target_link_options(npc_fuzz_core PUBLIC ${NPC_FUZZ_SANITIZERS})
set(NPC_FUZZ_DIR ${PROJECT_SOURCE_DIR}/tests/fuzz)
foreach(target text_reader binary_reader codegen)
  add_executable(npc_fuzz_${target} ${NPC_FUZZ_DIR}/fuzz_${target}.cc)
  target_link_libraries(npc_fuzz_${target} PRIVATE npc_fuzz_core)
  target_link_options(npc_fuzz_${target} PRIVATE -fsanitize=fuzzer)
  set_target_properties(npc_fuzz_${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz)
endforeach()
add_executable(npc_fuzz_to_proto ${NPC_FUZZ_DIR}/to_proto.cc)
target_link_libraries(npc_fuzz_to_proto PRIVATE npc_fuzz_core)
set_target_properties(npc_fuzz_to_proto PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/fuzz)
add_custom_target(npc_fuzzers DEPENDS npc_fuzz_text_reader npc_fuzz_binary_reader npc_fuzz_codegen npc_fuzz_to_proto)
