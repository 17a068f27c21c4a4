// Unit tests of runtime/util: the one atomic-write helper and SHA-256 digests.
#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "support/test_support.h"
#include "util/atomic_file.h"
#include "util/digest.h"

namespace npc::util {
namespace {

namespace fs = std::filesystem;
using npc::testing::ReadFile;
using npc::testing::TempDir;

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

TEST(WriteFileAtomic, CreatesParentsReplacesAndLeavesNoTemporary) {
  TempDir dir;
  const std::string path = dir.Sub("a/b/file.txt");
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  EXPECT_EQ(ReadFile(path), "first");
  ASSERT_TRUE(WriteFileAtomic(path, std::string(3 << 20, 'z')).ok());  // larger than one write
  EXPECT_EQ(ReadFile(path).size(), size_t{3} << 20);
  ASSERT_TRUE(WriteFileAtomic(path, "").ok());
  EXPECT_EQ(ReadFile(path), "");
  EXPECT_EQ(Names(dir.Sub("a/b")), std::vector<std::string>{"file.txt"});
}

TEST(WriteFileAtomic, ErrorsNameTheFileAndLeaveNothing) {
  TempDir dir;
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("plain"), "x"));
  auto st = WriteFileAtomic(dir.Sub("plain/inside"), "data");  // the parent is a file
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(dir.Sub("plain")), std::string::npos) << st.error().message;
  // The target is a directory: the rename fails, the temporary goes.
  fs::create_directories(dir.Sub("d/target"));
  st = WriteFileAtomic(dir.Sub("d/target"), "data");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("cannot rename"), std::string::npos) << st.error().message;
  EXPECT_EQ(Names(dir.Sub("d")), std::vector<std::string>{"target"});
}

TEST(TempPathFor, IsHiddenBesideTheTargetAndUnique) {
  const std::string a = TempPathFor("/x/y/model.so");
  const std::string b = TempPathFor("/x/y/model.so");
  EXPECT_EQ(a.rfind("/x/y/.model.so.tmp.", 0), 0u) << a;
  EXPECT_NE(a, b);
}

TEST(PutFileAtomic, MovesOrCopies) {
  TempDir dir;
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("src"), "ARTIFACT"));
  ASSERT_TRUE(PutFileAtomic(dir.Sub("src"), dir.Sub("out/copy"), /*consume=*/false).ok());
  EXPECT_EQ(ReadFile(dir.Sub("out/copy")), "ARTIFACT");
  EXPECT_TRUE(npc::testing::FileExists(dir.Sub("src")));
  ASSERT_TRUE(PutFileAtomic(dir.Sub("src"), dir.Sub("out/moved"), /*consume=*/true).ok());
  EXPECT_EQ(ReadFile(dir.Sub("out/moved")), "ARTIFACT");
  EXPECT_FALSE(npc::testing::FileExists(dir.Sub("src")));
  EXPECT_EQ(Names(dir.Sub("out")), (std::vector<std::string>{"copy", "moved"}));
  auto st = PutFileAtomic(dir.Sub("absent"), dir.Sub("out/x"), /*consume=*/true);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find(dir.Sub("absent")), std::string::npos) << st.error().message;
}

TEST(Sha256, KnownVectorsForMemoryAndFiles) {
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  TempDir dir;
  const std::string big(3 << 20, 'q');  // several read pieces
  ASSERT_TRUE(npc::testing::WriteFile(dir.Sub("f"), big));
  auto d = Sha256File(dir.Sub("f"));
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->size, static_cast<int64_t>(big.size()));
  EXPECT_EQ(d->sha256, Sha256Hex(big));
  auto missing = Sha256File(dir.Sub("none"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find(dir.Sub("none")), std::string::npos);
}

}  // namespace
}  // namespace npc::util
