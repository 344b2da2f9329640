// Replaced as the module gets its first real source file.
namespace ptd {
int recorder_placeholder = 0;
}  // namespace ptd
