// cuBLAS loaded at run time (worker/trainer/gpu/cublas_library.h): no GPU
// needed, only the CUDA toolkit this build was configured with.
#include "worker/trainer/gpu/cublas_library.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "worker/trainer/gpu/cuda_check.h"

namespace nereus {
namespace gpu {
namespace {

// Whether a file whose name contains `name` is mapped into this process.
bool Mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(name) != std::string::npos) return true;
  return false;
}

// Runs first (gtest keeps the file's order): nothing has loaded cuBLAS yet,
// and linking the trainer (as this test does) does not map it.
TEST(CublasLibraryTest, LinkingTheTrainerDoesNotLoadCublas) {
  EXPECT_FALSE(Mapped("libcublas")) << "libcublas is linked again: every trainer process pays its start-up";
}

TEST(CublasLibraryTest, LoadsTheBuildsMajorVersionAndResolvesEveryFunction) {
  StatusOr<std::unique_ptr<CublasLibrary>> lib = CublasLibrary::Load();
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_EQ(CublasLibrary::DefaultName(), "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_EQ((*lib)->version().rfind(std::to_string(CUBLAS_VER_MAJOR) + ".", 0), 0u) << (*lib)->version();
  const std::string& path = (*lib)->path();
  EXPECT_EQ(path.substr(path.rfind('/') + 1), CublasLibrary::DefaultName()) << path;
  EXPECT_TRUE(Mapped("libcublas.so"));
  const CublasApi& api = (*lib)->api();
#define NEREUS_CUBLAS_FUNCTION(name) EXPECT_NE(api.name, nullptr) << #name;
#include "worker/trainer/gpu/cublas_functions.inc"
#undef NEREUS_CUBLAS_FUNCTION
  int major = 0;
  ASSERT_EQ(api.cublasGetProperty(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);
}

TEST(CublasLibraryTest, AMissingLibraryIsNamedInTheError) {
  StatusOr<std::unique_ptr<CublasLibrary>> lib = CublasLibrary::Load("libcublas.so.999");
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(lib.status().message().rfind("libcublas.so.999 not found (", 0), 0u) << lib.status();
}

TEST(CublasLibraryTest, ALibraryWithoutTheFunctionsIsRefusedNamingOne) {
  // cuRAND is a CUDA library of the toolkit, but not cuBLAS.
  StatusOr<std::unique_ptr<CublasLibrary>> lib = CublasLibrary::Load("libcurand.so.10");
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("libcurand.so.10 has no cublasGetProperty: not a usable cuBLAS"),
            std::string::npos)
      << lib.status();
}

TEST(CublasLibraryTest, StatusesAreNamedWithoutTheLibrary) {
  EXPECT_STREQ(CublasStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(CublasStatusName(CUBLAS_STATUS_ALLOC_FAILED), "CUBLAS_STATUS_ALLOC_FAILED");
  EXPECT_STREQ(CublasStatusName(static_cast<cublasStatus_t>(99)), "unknown cuBLAS status");
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "cublasSgemm").code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(CublasStatus(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm").message(),
            "cublasSgemm: CUBLAS_STATUS_INVALID_VALUE");
}

}  // namespace
}  // namespace gpu
}  // namespace nereus
