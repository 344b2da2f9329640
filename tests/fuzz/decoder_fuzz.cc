// The decoder's parsers on hostile input: the --maps text parser, and a raw PT stream
// decoded by the fast decoder and both libipt decoders into the call-stack model against
// a small code image (the first bytes of the input after a separator are the code).
// Never a crash; the model's output always stays balanced.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "decoder/model/call_stack_model.h"
#include "decoder/flow/flow_decoder.h"
#include "image/maps_spec.h"
#include "image/module_cache.h"
#include "image/process_image.h"
#include "image/section_cache.h"

namespace {

class CountingSink : public ptd::decoder::SliceSink {
 public:
  void Begin(uint64_t, absl::string_view) override { ++open; }
  void End(uint64_t, const ptd::decoder::SliceCounts&) override {
    if (open == 0) std::abort();
    --open;
  }
  void Instant(uint64_t, absl::string_view, absl::string_view) override {}
  uint64_t open = 0;
};

class ModelConsumer : public ptd::decoder::FlowConsumer {
 public:
  explicit ModelConsumer(ptd::decoder::CallStackModel* model) : model_(model) {}
  void OnFlow(const ptd::decoder::FlowEvent& event) override { model_->OnEvent(event); }

 private:
  ptd::decoder::CallStackModel* model_;
};

class NoCode : public ptd::decoder::FunctionResolver {
 public:
  ptd::decoder::FunctionInfo Resolve(uint64_t address) override {
    // Pretend functions are 256-byte aligned blocks.
    return ptd::decoder::FunctionInfo{{address & ~0xffull, (address & ~0xffull) + 0x100, false, true, true}, "fn"};
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  (void)ptd::image::ParseMapsText(text, "fuzz/maps.txt", "/base");
  (void)ptd::image::ParseMapOption(text);

  // PT bytes against an image with no code: exercises sync, packets, events, errors and
  // the model's handling of whatever event order comes out.
  ptd::image::SectionCache sections;
  ptd::image::ModuleCache modules;
  ptd::image::ProcessImage image(&sections, &modules, "fuzz");
  for (ptd::decoder::DecoderKind kind :
       {ptd::decoder::DecoderKind::kFast, ptd::decoder::DecoderKind::kBlock, ptd::decoder::DecoderKind::kInsn}) {
    NoCode resolver;
    CountingSink sink;
    ptd::decoder::CallStackModel model(&resolver, &sink);
    ModelConsumer consumer(&model);
    ptd::decoder::PtDecodeConfig config;
    config.kind = kind;
    std::unique_ptr<ptd::decoder::FlowDecoder> decoder = ptd::decoder::MakeFlowDecoder(config, &image, &consumer);
    std::vector<uint8_t> padded(data, data + size);
    padded.resize(size + ptd::decoder::kPtPadding, 0);
    (void)decoder->DecodeChunk(padded.data(), size, 0);
    model.Finish(decoder->last_time(), decoder->instructions(), 0);
    if (sink.open != 0) std::abort();
  }
  return 0;
}
