"""Why a build that ships llama.cpp's Vulkan backend found no GPU on this machine, in one sentence
for the placement note: no Vulkan loader (libvulkan1), a loader without a working driver, or only
a software device (Mesa's llvmpipe, which ggml-vulkan leaves out unless GGML_VK_VISIBLE_DEVICES
names it). The Vulkan API is asked directly through ctypes: ggml reports none of this (a backend
that cannot load or finds no device is simply absent).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from pathlib import Path

# VkPhysicalDeviceType
_KINDS = {0: "other", 1: "integrated GPU", 2: "GPU", 3: "virtual GPU", 4: "CPU"}
_RESULTS = {
    -1: "VK_ERROR_OUT_OF_HOST_MEMORY",
    -2: "VK_ERROR_OUT_OF_DEVICE_MEMORY",
    -3: "VK_ERROR_INITIALIZATION_FAILED",
    -6: "VK_ERROR_LAYER_NOT_PRESENT",
    -7: "VK_ERROR_EXTENSION_NOT_PRESENT",
    -9: "VK_ERROR_INCOMPATIBLE_DRIVER",
}
_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1
LOADER = "libvulkan.so.1"


class _InstanceCreateInfo(ctypes.Structure):
    _fields_ = [
        ("sType", ctypes.c_int32),
        ("pNext", ctypes.c_void_p),
        ("flags", ctypes.c_uint32),
        ("pApplicationInfo", ctypes.c_void_p),
        ("enabledLayerCount", ctypes.c_uint32),
        ("ppEnabledLayerNames", ctypes.c_void_p),
        ("enabledExtensionCount", ctypes.c_uint32),
        ("ppEnabledExtensionNames", ctypes.c_void_p),
    ]


class _PropertiesHead(ctypes.Structure):
    """The start of VkPhysicalDeviceProperties (the rest is read into spare room, not parsed)."""

    _fields_ = [
        ("apiVersion", ctypes.c_uint32),
        ("driverVersion", ctypes.c_uint32),
        ("vendorID", ctypes.c_uint32),
        ("deviceID", ctypes.c_uint32),
        ("deviceType", ctypes.c_int32),
        ("deviceName", ctypes.c_char * 256),
    ]


@dataclass(frozen=True)
class VulkanDevice:
    name: str
    kind: str  # a value of _KINDS


@dataclass(frozen=True)
class VulkanState:
    """What the Vulkan loader says: `problem` is a sentence when it cannot be used at all."""

    devices: tuple[VulkanDevice, ...] = ()
    problem: str = ""


def probe(loader: str = LOADER) -> VulkanState:
    """Open the Vulkan loader, make an instance and list its physical devices."""
    try:
        vk = ctypes.CDLL(loader)
    except OSError as exc:
        if "No such file" in str(exc) or "not found" in str(exc):
            return VulkanState(problem="the Vulkan loader (libvulkan.so.1, package libvulkan1) is not installed")
        return VulkanState(problem=f"the Vulkan loader cannot be opened ({exc})")
    vk.vkCreateInstance.restype = ctypes.c_int32
    vk.vkCreateInstance.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    vk.vkEnumeratePhysicalDevices.restype = ctypes.c_int32
    vk.vkEnumeratePhysicalDevices.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
    vk.vkGetPhysicalDeviceProperties.restype = None
    vk.vkGetPhysicalDeviceProperties.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    vk.vkDestroyInstance.restype = None
    vk.vkDestroyInstance.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    info = _InstanceCreateInfo(sType=_STRUCTURE_TYPE_INSTANCE_CREATE_INFO)
    instance = ctypes.c_void_p()
    result = vk.vkCreateInstance(ctypes.byref(info), None, ctypes.byref(instance))
    if result != 0:
        return VulkanState(problem=f"Vulkan has no working driver here ({_RESULTS.get(result, result)})")
    try:
        count = ctypes.c_uint32(0)
        result = vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), None)
        if result != 0 or count.value == 0:
            return VulkanState(problem="the Vulkan driver found no device")
        handles = (ctypes.c_void_p * count.value)()
        vk.vkEnumeratePhysicalDevices(instance, ctypes.byref(count), handles)
        found = []
        for handle in handles[: count.value]:
            room = ctypes.create_string_buffer(4096)  # VkPhysicalDeviceProperties is about 800 bytes
            vk.vkGetPhysicalDeviceProperties(handle, room)
            head = _PropertiesHead.from_buffer(room)
            found.append(VulkanDevice(head.deviceName.decode("utf-8", "replace"), _KINDS.get(head.deviceType, "other")))
        return VulkanState(devices=tuple(found))
    finally:
        vk.vkDestroyInstance(instance, None)


def ships_vulkan(folders: list[Path]) -> bool:
    """Whether this build has the Vulkan backend as a library of its own in one of `folders`."""
    return any((folder / name).is_file() for folder in folders for name in ("libggml-vulkan.so", "ggml-vulkan.dll"))


def no_gpu_reason(state: VulkanState) -> str:
    """The placement note's sentence when the Vulkan backend gave no GPU: what stands in the way."""
    if state.problem:
        return f"no GPU: {state.problem}, so every layer runs on the CPU"
    software = [d.name for d in state.devices if d.kind == "CPU"]
    if software and len(software) == len(state.devices):
        return (
            f"no GPU: Vulkan offers only {', '.join(software)}, a software device slower than the CPU backend, "
            "so every layer runs on the CPU (GGML_VK_VISIBLE_DEVICES=0 uses it anyway)"
        )
    names = ", ".join(f"{d.name} ({d.kind})" for d in state.devices)
    return f"no GPU: llama.cpp's Vulkan backend could not use {names}, so every layer runs on the CPU"
