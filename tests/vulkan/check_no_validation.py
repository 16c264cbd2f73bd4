#!/usr/bin/env python3
"""Runs a command (argv[1:]) and fails when it fails or when its output holds
any Khronos validation message (lines "vulkan validation: ..." that the vulkan
plugin logs when HTR_VK_VALIDATION=1). Output is passed through."""
import subprocess
import sys

proc = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
out = proc.stdout.decode("utf-8", "replace")
sys.stdout.write(out)
bad = [l for l in out.splitlines() if "vulkan validation" in l]
if bad:
    print(f"check_no_validation: {len(bad)} validation message(s); first: {bad[0]}")
    sys.exit(1)
if "VK_LAYER_KHRONOS_validation" in out and "not installed" in out:
    print("check_no_validation: the validation layer is not installed")
    sys.exit(1)
sys.exit(proc.returncode)
