#include "services/platform/install_paths.h"

#include <unistd.h>

#include <filesystem>

#include "gtest/gtest.h"

namespace goodput::platform {
namespace {

namespace fs = std::filesystem;

// Runs the test body in a fresh folder and returns to the previous working directory after.
class InAFreshFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = fs::current_path();
    folder_ = fs::path(::testing::TempDir()) /
              ("install_paths_" + std::to_string(getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(folder_);
    fs::create_directories(folder_);
    fs::current_path(folder_);
  }
  void TearDown() override {
    fs::current_path(previous_);
    fs::remove_all(folder_);
  }
  fs::path previous_;
  fs::path folder_;
};

TEST(InstalledDataDir, IsShareGoodputBesideTheBinDirectory) {
  EXPECT_EQ(InstalledDataDir("/usr/bin/goodput-ingest", "migrations"),
            fs::path("/usr/share/goodput/migrations"));
  EXPECT_EQ(InstalledDataDir("/opt/goodput/bin/goodput-dashboard", "web"),
            fs::path("/opt/goodput/share/goodput/web"));
}

TEST(ExecutablePath, NamesTheRunningTestBinary) {
  EXPECT_EQ(ExecutablePath().filename(), "goodput_platform_test");
}

TEST_F(InAFreshFolder, MigrationsOfTheWorkingDirectoryComeFirst) {
  fs::create_directory("migrations");
  EXPECT_EQ(DefaultMigrationsDir(), "migrations");
}

TEST_F(InAFreshFolder, WithoutAnyMigrationsFolderTheNameLookedForIsReturned) {
  // The test binary is not installed: nothing sits in <build>/share/goodput/migrations.
  EXPECT_EQ(DefaultMigrationsDir(), "migrations");
}

}  // namespace
}  // namespace goodput::platform
