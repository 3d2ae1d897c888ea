"""What the rules' version ranges rest on, read from the real wheels (PyPI; flashinfer by
range requests of single files, cached): if upstream code said otherwise, the rule would
be wrong. Each test names the rule it backs."""

from __future__ import annotations

import ast
import zipfile

import pytest

from blackwell_stack.formats import remote_zip

pytestmark = pytest.mark.network

SGLANG_0_5_23 = "sglang-0.5.23-cp312-cp312-manylinux_2_34_x86_64.whl"


def flashinfer_file(version: str, member: str) -> str:
    remote = remote_zip.pypi_file("flashinfer-python", version, f"flashinfer_python-{version}-py3-none-any.whl")
    with remote_zip.RemoteWheel(remote) as wheel:
        return wheel.fetch_member(member).read_text()


def function(source: str, name: str) -> ast.FunctionDef:
    found = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name]
    assert len(found) == 1, name
    return found[0]


def capabilities(node: ast.FunctionDef) -> list[int]:
    """The list of @supported_compute_capability([...])."""
    for d in node.decorator_list:
        if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "supported_compute_capability":
            return ast.literal_eval(d.args[0])
    raise AssertionError(f"{node.name} has no @supported_compute_capability")


def gdc_flag(source: str, function_name: str) -> bool:
    return "-DCUTLASS_ENABLE_GDC_FOR_SM100=1" in ast.unparse(function(source, function_name))


@pytest.mark.parametrize("version, fixed", [("0.6.6", False), ("0.6.7", True), ("0.7.2", True)])
def test_sm120_cutlass_fp4_gemm_gets_the_pdl_fix_in_flashinfer_0_6_7(version, fixed):
    # sm120-fp4-gemm-cutlass-before-flashinfer-fix: holds for flashinfer <=0.6.6, not from 0.6.7.
    source = flashinfer_file(version, "flashinfer/jit/gemm/core.py")
    assert gdc_flag(source, "gen_gemm_sm120_module_cutlass_fp4") is fixed


@pytest.mark.parametrize("version, fixed", [("0.6.7", False), ("0.6.8", True), ("0.7.2", True)])
def test_sm120_cutlass_fused_moe_gets_the_pdl_fix_in_flashinfer_0_6_8(version, fixed):
    # sm120-moe-cutlass-before-flashinfer-gdc-fix: holds for flashinfer <=0.6.7, not from 0.6.8.
    source = flashinfer_file(version, "flashinfer/jit/fused_moe.py")
    assert gdc_flag(source, "gen_cutlass_fused_moe_sm120_module") is fixed


def test_flashinfer_0_7_2_backends_on_sm120():
    gemm = flashinfer_file("0.7.2", "flashinfer/gemm/gemm_base.py")
    # sm120-fp4-gemm-flashinfer-trtllm: the TensorRT-LLM FP4 GEMM has no SM120.
    assert 120 not in capabilities(function(gemm, "_trtllm_gemm_fp4_requirement"))
    # The backends that do run there (the profiles' flashinfer_cudnn; auto's flashinfer_cutlass; b12x).
    for name in ("_cudnn_gemm_fp4_requirement", "_cutlass_gemm_fp4_requirement", "_b12x_gemm_fp4_requirement"):
        assert 120 in capabilities(function(gemm, name)), name
    # The cuDNN FP4 NaN fix (flashinfer PR #3192): the override graph is cached by the autotuner's M bucket.
    assert "self._m_bucket_mapper(actual_m)" in gemm
    # sm120-moe-flashinfer-cutedsl: CuteDslMoEWrapper (sglang's flashinfer_cutedsl runner) has no SM120.
    moe = ast.parse(flashinfer_file("0.7.2", "flashinfer/fused_moe/cute_dsl/fused_moe.py"))
    wrapper = next(n for n in moe.body if isinstance(n, ast.ClassDef) and n.name == "CuteDslMoEWrapper")
    caps = [capabilities(f) for f in wrapper.body if isinstance(f, ast.FunctionDef) and f.decorator_list
            and any(getattr(getattr(d, "func", None), "id", None) == "supported_compute_capability" for d in f.decorator_list)]
    assert caps and all(120 not in c for c in caps)


@pytest.fixture(scope="module")
def sglang_0_5_23(pypi_file):
    zf = zipfile.ZipFile(pypi_file("sglang", "0.5.23", SGLANG_0_5_23))
    return lambda path: zf.read(path).decode()


def test_sglang_0_5_23_resolves_auto_on_sm120(sglang_0_5_23):
    # The current profiles: auto FP4 GEMM is flashinfer_cutlass on SM120; auto MoE is flashinfer_cutlass for modelopt_fp4.
    fp4 = ast.unparse(function(sglang_0_5_23("sglang/srt/layers/quantization/fp4_utils.py"), "initialize_fp4_gemm_config"))
    assert "backend = 'flashinfer_cutedsl'" in fp4 and "backend = 'marlin'" in fp4 and "backend = 'flashinfer_cutlass'" in fp4
    assert "b12x" not in fp4
    moe = ast.unparse(function(sglang_0_5_23("sglang/srt/arg_groups/overrides.py"), "_moe_runner_backend_quant_constraints"))
    assert "get_platform().is_sm120" in moe and "moe_runner_backend = 'flashinfer_cutlass'" in moe


def test_sglang_0_5_23_attention_on_sm120(sglang_0_5_23):
    hook = sglang_0_5_23("sglang/srt/arg_groups/attention_hook.py")
    # sm120-trtllm-mha-refused-by-sglang does not hold for 0.5.23; sm120-trtllm-mha-prefill-fp8-kv-cache does.
    assert "TRTLLM FMHAv2 prefill on SM120 does not support" in hook
    assert "get_platform().is_sm90 or get_platform().is_sm100 or get_platform().is_sm120" in hook
    # sm120-attention-backend-without-kernels: fa3 is the kernel package's FA3.
    backend = sglang_0_5_23("sglang/srt/layers/attention/flashattention_backend.py")
    assert "from sgl_kernel.flash_attn import" in backend


def test_sglang_0_5_23_kv_cache_and_all_reduce(sglang_0_5_23):
    # fp8-kv-cache-without-calibrated-scales, kv-cache-dtype-auto.
    loader = sglang_0_5_23("sglang/srt/model_executor/model_runner_components/load_model_utils.py")
    assert "Defaulting to scaling factors of 1.0" in loader
    dtype = ast.unparse(function(sglang_0_5_23("sglang/srt/mem_cache/kv_cache_dtype.py"), "configure_kv_cache_dtype"))
    assert "kv_cache_quant_algo.upper() == 'FP8'" in dtype
    # custom-all-reduce-on-pcie: switched off by SGLang itself only above two PCIe-only GPUs.
    utils = sglang_0_5_23("sglang/srt/distributed/device_communicators/custom_all_reduce_utils.py")
    assert "world_size > 2 and not full_nvlink" in utils


def test_sglang_0_5_23_environment(sglang_0_5_23):
    # The current profiles drop SGLANG_DISABLE_CUDNN_CHECK (nothing reads it) and mark
    # SGLANG_ENABLE_JIT_DEEPGEMM unverified (DeepGEMM is enabled on SM120 when it has the APIs).
    assert "SGLANG_DISABLE_CUDNN_CHECK" not in sglang_0_5_23("sglang/srt/environ.py")
    assert "SGLANG_DISABLE_CUDNN_CHECK" not in sglang_0_5_23("sglang/srt/server_args.py")
    configurer = sglang_0_5_23("sglang/srt/layers/deep_gemm_wrapper/configurer.py")
    assert "_sm120_deep_gemm_apis_available" in configurer


def test_sglang_0_5_23_reads_v2_as_modelopt_mixed(sglang_0_5_23):
    # qwen3.5-397b-a17b-nvfp4-v2-sm120-current: --quantization modelopt_mixed.
    parse = ast.unparse(function(sglang_0_5_23("sglang/srt/configs/model_config.py"), "_parse_modelopt_quant_config"))
    assert "quant_algo == 'MIXED_PRECISION'" in parse and "'modelopt_mixed'" in parse
    quant = sglang_0_5_23("sglang/srt/layers/quantization/modelopt_quant.py")
    assert 'if hf_quant_config.get("quant_method", "") == "modelopt_mixed":\n            return "modelopt_mixed"' in quant


def test_the_current_profiles_runtime_is_what_sglang_0_5_23_requires(sglang_0_5_23):
    from blackwell_stack.data.profile import load_profile

    requires = [line.split(":", 1)[1].strip() for line in sglang_0_5_23("sglang-0.5.23.dist-info/METADATA").splitlines()
                if line.startswith("Requires-Dist:")]
    assert {"flashinfer_python[cu13]==0.7.2", "sglang-kernel==0.4.10", "torch==2.14.1"} <= set(requires)
    for name in ("qwen3.5-397b-a17b-nvfp4-sm120-current", "qwen3.5-397b-a17b-nvfp4-v2-sm120-current"):
        runtime = load_profile(name).runtime()
        assert (runtime.sglang, runtime.flashinfer) == ("0.5.23", "0.7.2")
