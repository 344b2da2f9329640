// The one translation unit of ptd_test_pch, the target whose precompiled gtest/gmock
// header every test executable reuses (see ptd_test in cmake/Dependencies.cmake).
