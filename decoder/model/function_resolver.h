#pragma once
// What the call-stack model asks of the code image: which function holds an address.
// An interface so the model can be tested with a hand-made address map.

#include <cstdint>
#include <vector>

#include "image/process_image.h"

namespace ptd::decoder {

using image::FunctionInfo;

class FunctionResolver {
 public:
  virtual ~FunctionResolver() = default;
  virtual FunctionInfo Resolve(uint64_t address) = 0;
  // Inlined frames: where the innermost source frame changes along the straight run of
  // instructions from `start` to `last` (ProcessImage::SourceFramesAlong). False: none
  // known.
  virtual bool SourceFramesAlong(uint64_t /*start*/, uint64_t /*last*/,
                                 const std::vector<image::ProcessImage::SourceFrameChange>** /*changes*/) {
    return false;
  }
  // The exec that started the program the image holds now (exec_ns 0: none seen).
  virtual const image::ProgramStart& program_start() {
    static const image::ProgramStart kNone;
    return kNone;
  }
};

// The product's resolver: a process image's symbols.
class ImageFunctionResolver : public FunctionResolver {
 public:
  explicit ImageFunctionResolver(image::ProcessImage* image) : image_(image) {}
  FunctionInfo Resolve(uint64_t address) override { return image_->Resolve(address); }
  const image::ProgramStart& program_start() override { return image_->program_start(); }
  bool SourceFramesAlong(uint64_t start, uint64_t last,
                         const std::vector<image::ProcessImage::SourceFrameChange>** changes) override {
    return image_->SourceFramesAlong(start, last, changes);
  }

 private:
  image::ProcessImage* image_;
};

}  // namespace ptd::decoder
