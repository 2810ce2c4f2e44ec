#include "services/platform/migrations.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

namespace goodput::platform {
namespace {

namespace fs = std::filesystem;

class MigrationFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "goodput-migrations-unit-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  fs::path dir_;
};

TEST(Sha256Hex, MatchesTheStandardTestVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_F(MigrationFiles, AreSortedByVersionAndOtherFilesIgnored) {
  Write("0010_later.sql", "SELECT 10;");
  Write("0002_second.sql", "SELECT 2;");
  Write("0001_first.sql", "SELECT 1;");
  Write("README.md", "not a migration");
  auto files = LoadMigrationFiles(dir_);
  ASSERT_TRUE(files.ok()) << files.status();
  ASSERT_EQ(files->size(), 3u);
  EXPECT_EQ((*files)[0].version, 1);
  EXPECT_EQ((*files)[0].name, "first");
  EXPECT_EQ((*files)[1].FileName(), "0002_second.sql");
  EXPECT_EQ((*files)[2].version, 10);
  EXPECT_EQ((*files)[2].sql, "SELECT 10;");
  EXPECT_EQ((*files)[2].sha256_hex, Sha256Hex("SELECT 10;"));
}

TEST_F(MigrationFiles, RefuseANameWithoutTheNumberPrefix) {
  Write("add_table.sql", "SELECT 1;");
  auto files = LoadMigrationFiles(dir_);
  ASSERT_FALSE(files.ok());
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(files.status().message().find("add_table.sql"), std::string::npos);
}

TEST_F(MigrationFiles, RefuseTwoFilesWithOneVersion) {
  Write("0003_a.sql", "SELECT 1;");
  Write("0003_b.sql", "SELECT 2;");
  auto files = LoadMigrationFiles(dir_);
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.status().message().find("same version 3"), std::string::npos) << files.status();
}

TEST_F(MigrationFiles, RefuseVersionZero) {
  Write("0000_zero.sql", "SELECT 1;");
  EXPECT_EQ(LoadMigrationFiles(dir_).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MigrationFilesMissing, MissingFolderIsNotFound) {
  auto files = LoadMigrationFiles("/nonexistent/goodput/migrations");
  EXPECT_EQ(files.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MigrationFiles, UnreachableDatabaseIsUnavailable) {
  Write("0001_first.sql", "SELECT 1;");
  auto report = ApplyMigrations("host=127.0.0.1 port=1 dbname=none connect_timeout=2", dir_);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kUnavailable) << report.status();
}

}  // namespace
}  // namespace goodput::platform
