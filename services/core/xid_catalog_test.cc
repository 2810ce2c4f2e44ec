#include "services/core/xid_catalog.h"

#include "gtest/gtest.h"

namespace goodput::core {
namespace {

TEST(XidCatalog, ApplicationFaultsAreTheApplications) {
  for (int code : {13, 31, 43}) {
    const XidInfo* info = FindXid(code);
    ASSERT_NE(info, nullptr) << code;
    EXPECT_EQ(info->blame, XidBlame::kApplication) << code;
  }
}

TEST(XidCatalog, HardwareAndDriverFaultsAreNotTheApplications) {
  for (int code : {48, 63, 64, 74, 79, 92, 94, 95}) {
    const XidInfo* info = FindXid(code);
    ASSERT_NE(info, nullptr) << code;
    EXPECT_EQ(info->blame, XidBlame::kHardware) << code;
  }
  for (int code : {119, 120}) {
    const XidInfo* info = FindXid(code);
    ASSERT_NE(info, nullptr) << code;
    EXPECT_EQ(info->blame, XidBlame::kDriver) << code;
  }
}

TEST(XidCatalog, EveryEntryHasMeaningActionAndSource) {
  int previous = 0;
  for (const XidInfo& info : XidCatalog()) {
    EXPECT_GT(info.code, previous) << "codes sorted and unique";
    previous = info.code;
    EXPECT_FALSE(info.meaning.empty()) << info.code;
    EXPECT_FALSE(info.action.empty()) << info.code;
    EXPECT_NE(info.source.find("docs.nvidia.com"), std::string_view::npos) << info.code;
  }
  EXPECT_EQ(FindXid(79)->meaning, "GPU has fallen off the bus");
}

TEST(XidCatalog, UnknownCodesAreNotInvented) {
  EXPECT_EQ(FindXid(0), nullptr);
  EXPECT_EQ(FindXid(9999), nullptr);
  EXPECT_EQ(FindXid(-1), nullptr);
}

}  // namespace
}  // namespace goodput::core
