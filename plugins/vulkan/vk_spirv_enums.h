// vk_spirv_enums.h — the SPIR-V values the plugin's own SPIR-V code reads and writes
// (vk_spirv_bf16.cc rewrites glslang's modules, vk_spirv_tensor_mm.cc builds one): SPIR-V 1.6 core
// plus SPV_NV_cooperative_matrix, SPV_KHR_cooperative_matrix, SPV_KHR_bfloat16,
// SPV_NV_cooperative_matrix2 and SPV_NV_tensor_addressing (SPIRV-Headers' grammar; Debian 12's
// headers predate the last four). Plain constants, no behaviour.
#ifndef HTR_VK_SPIRV_ENUMS_H_
#define HTR_VK_SPIRV_ENUMS_H_

#include <cstdint>

namespace htr_vk {
namespace spv_enums {

// Opcodes.
enum : uint32_t {
  kOpSource = 3,
  kOpName = 5,
  kOpMemberName = 6,
  kOpString = 7,
  kOpLine = 8,
  kOpExtension = 10,
  kOpMemoryModel = 14,
  kOpEntryPoint = 15,
  kOpExecutionMode = 16,
  kOpCapability = 17,
  kOpTypeVoid = 19,
  kOpTypeBool = 20,
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeVector = 23,
  kOpTypeArray = 28,
  kOpTypeRuntimeArray = 29,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpTypeFunction = 33,
  kOpConstantTrue = 41,
  kOpConstantFalse = 42,
  kOpConstant = 43,
  kOpConstantComposite = 44,
  kOpFunction = 54,
  kOpFunctionEnd = 56,
  kOpVariable = 59,
  kOpLoad = 61,
  kOpStore = 62,
  kOpAccessChain = 65,
  kOpDecorate = 71,
  kOpMemberDecorate = 72,
  kOpCompositeExtract = 81,
  kOpCopyObject = 83,
  kOpUConvert = 113,
  kOpFConvert = 115,
  kOpConvertUToPtr = 120,
  kOpIAdd = 128,
  kOpIMul = 132,
  kOpUDiv = 134,
  kOpUMod = 137,
  kOpULessThan = 176,
  kOpBitwiseAnd = 199,
  kOpPhi = 245,
  kOpLoopMerge = 246,
  kOpSelectionMerge = 247,
  kOpLabel = 248,
  kOpBranch = 249,
  kOpBranchConditional = 250,
  kOpReturn = 253,
  kOpModuleProcessed = 330,
  kOpTypeCoopKHR = 4456,
  kOpCoopLoadKHR = 4457,
  kOpCoopStoreKHR = 4458,
  kOpCoopMulAddKHR = 4459,
  kOpTypeCoopNV = 5358,
  kOpCoopLoadNV = 5359,
  kOpCoopStoreNV = 5360,
  kOpCoopMulAddNV = 5361,
  kOpCoopLengthNV = 5362,
  kOpCoopLoadTensorNV = 5367,
  kOpCoopStoreTensorNV = 5368,
  kOpTypeTensorLayoutNV = 5370,
  kOpTypeTensorViewNV = 5371,
  kOpCreateTensorLayoutNV = 5372,
  kOpTensorLayoutSetDimensionNV = 5373,
  kOpTensorLayoutSetStrideNV = 5374,
  kOpTensorLayoutSliceNV = 5375,
  kOpCreateTensorViewNV = 5377,
};

// Capabilities.
enum : uint32_t {
  kCapShader = 1,
  kCapFloat16 = 9,
  kCapInt64 = 11,
  kCapBF16Type = 5116,
  kCapBF16Coop = 5118,
  kCapPhysicalStorageBuffer = 5347,
  kCapCoopNV = 5357,
  kCapCoopTensorAddressingNV = 5433,
  kCapTensorAddressingNV = 5439,
  kCapCoopKHR = 6022,
};

// Operands: addressing / memory models, execution models and modes, storage classes, decorations,
// built-ins, memory access and tensor addressing masks, scopes, matrix uses, clamp modes, encodings.
enum : uint32_t {
  kAddressingPhysicalStorageBuffer64 = 5348,
  kBuiltInWorkgroupId = 26,
  kClampUndefined = 0,
  kDecorationArrayStride = 6,
  kDecorationBlock = 2,
  kDecorationBuiltIn = 11,
  kDecorationOffset = 35,
  kEncodingBF16 = 0,
  kExecGLCompute = 5,
  kMemoryAccessAligned = 2,
  kMemoryModelGLSL450 = 1,
  kModeLocalSize = 17,
  kScopeSubgroup = 3,
  kScopeWorkgroup = 2,
  kStorageFunction = 7,
  kStorageInput = 1,
  kStoragePhysicalStorageBuffer = 5349,
  kStoragePushConstant = 9,
  kTensorAddressingView = 1,
  kUseA = 0,
  kUseAcc = 2,
  kUseB = 1,
};

}  // namespace spv_enums
}  // namespace htr_vk

#endif  // HTR_VK_SPIRV_ENUMS_H_
