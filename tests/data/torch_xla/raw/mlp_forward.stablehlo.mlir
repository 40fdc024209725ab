#loc1 = /work/txla-venv/lib/python3.11/site-packages/torch/nn/modules/linear.py:134:0
#loc2 = /work/txla-venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1786:0
#loc3 = /work/txla-venv/lib/python3.11/site-packages/torch/nn/modules/module.py:1775:0
#loc4 = /work/txla-venv/lib/python3.11/site-packages/torch/nn/modules/container.py:250:0
#loc5 = /work/wt-txla/benchmarks/make_torch_xla_data.py:171:0
#loc6 = /work/wt-txla/benchmarks/make_torch_xla_data.py:347:0
#loc7 = /work/wt-txla/benchmarks/make_torch_xla_data.py:376:0
#loc8 = /work/wt-txla/benchmarks/make_torch_xla_data.py:421:0
#loc11 = "forward"(#loc1)
#loc12 = "_call_impl"(#loc2)
#loc13 = "_wrapped_call_impl"(#loc3)
#loc14 = "forward"(#loc4)
#loc15 = "step"(#loc5)
#loc16 = "run_raw"(#loc6)
#loc17 = "main"(#loc7)
#loc18 = "<module>"(#loc8)
#loc21 = #loc17
 at #loc18
#loc22 = #loc16
 at #loc21
#loc23 = #loc15
 at #loc22
#loc24 = #loc13
 at #loc23
#loc25 = #loc12
 at #loc24
#loc26 = #loc14
 at #loc25
#loc27 = #loc13
 at #loc26
#loc28 = #loc12
 at #loc27
#loc29 = #loc11
 at #loc28
#loc31 = "xla__device_data"(#loc29)
module @IrToHlo.24 attributes {mhlo.cross_program_prefetches = [], mhlo.input_output_alias = [], mhlo.is_dynamic = false, mhlo.use_auto_spmd_partitioning = false} {
  func.func @main(%arg0: tensor<10xf32> "xla__device_data"(#loc29), %arg1: tensor<10x128xf32> "xla__device_data"(#loc29), %arg2: tensor<128xf32> "xla__device_data"(#loc29), %arg3: tensor<128x64xf32> "xla__device_data"(#loc29), %arg4: tensor<32x64xf32> "xla__device_data"(#loc29)) -> tensor<32x10xf32> {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<32x128xf32> "aten__relu"(#loc32)
    %0 = stablehlo.transpose %arg3, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[64,128]{0,1}"} : (tensor<128x64xf32>) -> tensor<64x128xf32> "aten__permute"(#loc29)
    %1 = stablehlo.dot_general %arg4, %0, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x64xf32>, tensor<64x128xf32>) -> tensor<32x128xf32> "aten__addmm"(#loc29)
    %2 = stablehlo.broadcast_in_dim %arg2, dims = [1] : (tensor<128xf32>) -> tensor<32x128xf32> "aten__addmm"(#loc29)
    %3 = stablehlo.add %1, %2 : tensor<32x128xf32> "aten__addmm"(#loc29)
    %4 = stablehlo.maximum %3, %cst : tensor<32x128xf32> "aten__relu"(#loc32)
    %5 = stablehlo.transpose %arg1, dims = [1, 0] {result_layout = dense<[0, 1]> : tensor<2xindex>, xla_shape = "f32[128,10]{0,1}"} : (tensor<10x128xf32>) -> tensor<128x10xf32> "aten__permute"(#loc29)
    %6 = stablehlo.dot_general %4, %5, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<32x128xf32>, tensor<128x10xf32>) -> tensor<32x10xf32> "aten__addmm"(#loc29)
    %7 = stablehlo.broadcast_in_dim %arg0, dims = [1] : (tensor<10xf32>) -> tensor<32x10xf32> "aten__addmm"(#loc29)
    %8 = stablehlo.add %6, %7 : tensor<32x10xf32> "aten__addmm"(#loc29)
    return %8 : tensor<32x10xf32> [unknown]
  } [unknown]
} [unknown]
#loc = [unknown]
#loc9 = /work/txla-venv/lib/python3.11/site-packages/torch/nn/functional.py:1697:0
#loc10 = /work/txla-venv/lib/python3.11/site-packages/torch/nn/modules/activation.py:144:0
#loc19 = "relu"(#loc9)
#loc20 = "forward"(#loc10)
#loc30 = #loc20
 at #loc28
#loc32 = #loc19
 at #loc30
#loc33 = "aten__permute"(#loc29)
#loc34 = "aten__addmm"(#loc29)
#loc35 = "aten__relu"(#loc32)
