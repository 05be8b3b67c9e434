"""What machine a run names: /proc/cpuinfo read by hand-checked examples."""

import pytest

from moozi.observe.machine import cpu_description, machine_info, machine_line, parse_cpuinfo

# Two processors of a 2-core cloud machine (shortened); only the first block is read.
ZEN3 = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma

processor\t: 1
model name\t: something else
flags\t\t: avx512f
"""

SAPPHIRE = """processor : 0
cpu family : 6
model : 143
model name : Intel(R) Xeon(R) Platinum 8480+
flags : avx2 avx512f avx512bw
"""

ARM = """processor\t: 0
BogoMIPS\t: 50.00
Features\t: fp asimd aes
CPU implementer\t: 0x41
"""


def test_first_processor_only():
    info = parse_cpuinfo(ZEN3)
    assert info == {"model_name": "AMD EPYC", "family": "25", "model": "1",
                    "flags": ["avx", "avx2", "fma", "fpu", "sse2"]}
    assert cpu_description(info) == "AMD EPYC (family 25 model 1, AVX2, no AVX-512)"


def test_avx512_is_named():
    assert cpu_description(parse_cpuinfo(SAPPHIRE)) == \
        "Intel(R) Xeon(R) Platinum 8480+ (family 6 model 143, AVX2, AVX-512)"


def test_arm_and_missing_cpuinfo():
    info = parse_cpuinfo(ARM)
    assert info["model_name"] is None and info["family"] is None and info["flags"] == ["aes", "asimd", "fp"]
    assert cpu_description(info).endswith("(no AVX-512)")  # named by platform, then the flags
    assert parse_cpuinfo("") == {"model_name": None, "family": None, "model": None, "flags": []}
    assert cpu_description(parse_cpuinfo(""))  # some name, never empty


def test_this_machine():
    info = machine_info()
    assert info["cores"] >= info["usable_cores"] >= 1 and info["python"].count(".") == 2
    line = machine_line(info)
    assert line.startswith(info["cpu"]) and f"{info['usable_cores']} of {info['cores']} cores usable" in line


def test_peak_rss_sees_a_peak_that_is_gone_by_the_end():
    import mmap

    from moozi.observe.memory import PeakRss

    with PeakRss() as quiet:
        pass
    with PeakRss() as peak:
        # 64 MB of fresh pages, touched. Mapped directly, not allocated by numpy: in a test worker that has run
        # other tests, malloc may hand back heap pages still resident from them, and resident memory would not rise.
        block = mmap.mmap(-1, 64 * 2**20)
        block.write(b"\1" * len(block))
        block.close()  # freed before the block ends: a sampler at the end would miss it
    if peak.extra_mb is None:
        pytest.skip("this kernel does not let a process reset its resident high-water mark")
    assert peak.extra_mb >= 60 and quiet.extra_mb < 8


def test_gpu_busy_fraction_is_read_from_nvidia_smi_lines_by_hand():
    from moozi.observe.machine import gpu_busy_fraction, parse_gpu_utilization

    text = "0, 87\n1, 13\n2, [N/A]\n"
    assert parse_gpu_utilization(text) == pytest.approx(0.5)  # (0.87 + 0.13) / 2; N/A is skipped
    assert parse_gpu_utilization(text, [1]) == pytest.approx(0.13)  # CUDA_VISIBLE_DEVICES=1
    assert parse_gpu_utilization(text, [2]) is None and parse_gpu_utilization("") is None
    assert parse_gpu_utilization("No devices were found\n") is None
    assert gpu_busy_fraction() is None  # JAX runs on a CPU here (or is not imported): nothing to sample
