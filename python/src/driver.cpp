//===- driver.cpp - loading and launching kernels with the CUDA driver ----===//
//
// libcuda.so.1 is opened with dlopen on first use, so the extension builds
// without the CUDA toolkit and imports on a machine without a GPU. The few
// driver types and constants used are declared here (values from cuda.h).
//
//===----------------------------------------------------------------------===//

#include "binding.h"
#include "tensor_maps.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <dlfcn.h>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;
using sage::python::HostExpression;
using sage::python::HostTensorMap;
using sage::python::TensorMapFields;

namespace {
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr int CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9;
constexpr unsigned CU_MEMORYTYPE_HOST = 1;
constexpr int CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3;
constexpr int CU_FUNC_ATTRIBUTE_NUM_REGS = 4;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
/// CUlaunchAttributeID: the launch may start before the previous kernel of
/// the stream finishes (programmatic dependent launch).
constexpr int CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;
/// Dynamic shared memory a kernel may use without opting in.
constexpr int kDefaultSharedMemoryLimit = 48 * 1024;

/// cuda.h's CUlaunchAttribute: an id, then a 64-byte value union at offset 8
/// (the programmatic serialisation flag is its first int).
struct CUlaunchAttribute {
  int id;
  char pad[4];
  union {
    int flag;
    char bytes[64];
  } value;
};

/// cuda.h's CUlaunchConfig.
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned numAttrs;
};

/// The driver entry points used, resolved once.
struct Driver {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int *);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, int *,
                                 void **);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuFuncGetAttribute)(int *, int, CUfunction);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void **,
                             void **);
  CUresult (*cuPointerGetAttribute)(void *, int, CUdeviceptr);
  CUresult (*cuGetErrorName)(CUresult, const char **);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  // Optional (CUDA 12.0+): early launches use it; without it they launch
  // after the previous kernel, which their wait then finds finished.
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **,
                               void **);
  // Optional (CUDA 12.0+): only kernels with host tensor maps need it.
  CUresult (*cuTensorMapEncodeTiled)(void *, int, std::uint32_t, void *,
                                     const std::uint64_t *,
                                     const std::uint64_t *,
                                     const std::uint32_t *,
                                     const std::uint32_t *, int, int, int, int);
};

/// Raised for every failing driver call, with the driver's own words.
PyObject *cudaErrorType = nullptr;
/// Raised before a launch whose host tensor map would have an empty
/// dimension (the driver encodes none; the JIT relaunches with device maps).
PyObject *emptyMapErrorType = nullptr;

[[noreturn]] void raiseCudaError(const std::string &message) {
  PyErr_SetString(cudaErrorType, message.c_str());
  throw py::error_already_set();
}

std::string loadError;

/// The driver, loaded and initialised on first use; raises CudaError when
/// there is no usable driver.
const Driver &driver() {
  static Driver api;
  static bool loaded = false;
  static std::once_flag once;
  std::call_once(once, [] {
    void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      loadError = std::string("cannot load the CUDA driver (libcuda.so.1): ") +
                  dlerror();
      return;
    }
    bool complete = true;
    auto bind = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(handle, name));
      if (!fn && complete) {
        complete = false;
        loadError = std::string("the CUDA driver lacks ") + name;
      }
    };
#define SAGE_BIND(name) bind(api.name, #name)
    SAGE_BIND(cuInit);
    SAGE_BIND(cuDriverGetVersion);
    SAGE_BIND(cuDeviceGetCount);
    SAGE_BIND(cuDeviceGet);
    SAGE_BIND(cuDeviceGetAttribute);
    SAGE_BIND(cuDevicePrimaryCtxRetain);
    SAGE_BIND(cuCtxGetCurrent);
    SAGE_BIND(cuCtxSetCurrent);
    SAGE_BIND(cuCtxSynchronize);
    SAGE_BIND(cuModuleLoadDataEx);
    SAGE_BIND(cuModuleGetFunction);
    SAGE_BIND(cuModuleUnload);
    SAGE_BIND(cuFuncSetAttribute);
    SAGE_BIND(cuFuncGetAttribute);
    SAGE_BIND(cuLaunchKernel);
    SAGE_BIND(cuPointerGetAttribute);
    SAGE_BIND(cuGetErrorName);
    SAGE_BIND(cuGetErrorString);
#undef SAGE_BIND
    if (!complete)
      return;
    api.cuLaunchKernelEx = reinterpret_cast<decltype(api.cuLaunchKernelEx)>(
        dlsym(handle, "cuLaunchKernelEx"));
    api.cuTensorMapEncodeTiled =
        reinterpret_cast<decltype(api.cuTensorMapEncodeTiled)>(
            dlsym(handle, "cuTensorMapEncodeTiled"));
    CUresult status = api.cuInit(0);
    if (status != CUDA_SUCCESS) {
      const char *name = nullptr;
      api.cuGetErrorName(status, &name);
      loadError = std::string("cuInit failed: ") + (name ? name : "?");
      return;
    }
    loaded = true;
  });
  if (!loaded)
    raiseCudaError(loadError);
  return api;
}

/// Raises CudaError("<what>: <NAME> (<description>)") unless status is 0.
void check(CUresult status, const std::string &what) {
  if (status == CUDA_SUCCESS)
    return;
  const Driver &api = driver();
  const char *name = nullptr, *text = nullptr;
  api.cuGetErrorName(status, &name);
  api.cuGetErrorString(status, &text);
  raiseCudaError(what + ": " +
                 (name ? name : "CUDA error " + std::to_string(status)) + " (" +
                 (text ? text : "no description") + ")");
}

CUcontext primaryContext(int ordinal) {
  const Driver &api = driver();
  CUdevice device;
  check(api.cuDeviceGet(&device, ordinal),
        "cuDeviceGet(" + std::to_string(ordinal) + ")");
  CUcontext context;
  check(api.cuDevicePrimaryCtxRetain(&context, device),
        "cuDevicePrimaryCtxRetain");
  return context;
}

void makeCurrent(CUcontext context) {
  const Driver &api = driver();
  CUcontext current = nullptr;
  check(api.cuCtxGetCurrent(&current), "cuCtxGetCurrent");
  if (current != context)
    check(api.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

int deviceAttribute(int ordinal, int attribute) {
  const Driver &api = driver();
  CUdevice device;
  check(api.cuDeviceGet(&device, ordinal),
        "cuDeviceGet(" + std::to_string(ordinal) + ")");
  int value = 0;
  check(api.cuDeviceGetAttribute(&value, attribute, device),
        "cuDeviceGetAttribute");
  return value;
}

/// A host tensor map as Python hands it over: (param, address, dims,
/// strides, box, element type, swizzle), from the PTX header.
using MapSpec =
    std::tuple<unsigned, std::string, std::vector<std::string>,
               std::vector<std::string>, std::vector<std::uint32_t>, int, int>;

/// Tensor-map enums of cuda.h used by the encoder.
constexpr int CU_TENSOR_MAP_INTERLEAVE_NONE = 0;
constexpr int CU_TENSOR_MAP_L2_PROMOTION_NONE = 0;
constexpr int CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0;

/// A host tensor map's 128 bytes as a kernel parameter (64-byte aligned).
struct alignas(64) EncodedMap {
  unsigned char bytes[128];
};

/// One kernel of a loaded module, with the launch facts of its PTX header.
/// The signature has one letter per argument the caller passes: P
/// (pointer), i (i32), l (i64), f (f32); the host tensor maps follow them
/// as the last parameters, computed from those arguments on each launch.
class Kernel {
public:
  Kernel(const py::bytes &image, std::string name, int device, int threads,
         int sharedMemory, std::string signature,
         const std::vector<MapSpec> &tensorMaps, int cluster, bool earlyLaunch)
      : name(std::move(name)), signature(std::move(signature)), device(device),
        threads(threads), sharedMemory(sharedMemory), cluster(cluster),
        earlyLaunch(earlyLaunch) {
    if (cluster < 1)
      throw py::value_error("kernel " + this->name +
                            ": programs per cluster must be >= 1, got " +
                            std::to_string(cluster));
    for (char c : this->signature)
      if (c != 'P' && c != 'i' && c != 'l' && c != 'f')
        throw py::value_error("bad kernel signature '" + this->signature +
                              "': letters are P, i, l, f");
    for (const MapSpec &spec : tensorMaps) {
      auto &[param, address, dims, strides, box, elementType, swizzle] = spec;
      if (param != this->signature.size() + maps.size())
        throw py::value_error("kernel " + this->name +
                              ": host tensor map "
                              "parameter " +
                              std::to_string(param) +
                              " does not follow the arguments");
      if (dims.size() < 2 || dims.size() > 5 ||
          strides.size() + 1 != dims.size() || box.size() != dims.size())
        throw py::value_error("kernel " + this->name +
                              ": malformed host tensor map " +
                              std::to_string(param));
      try {
        HostTensorMap map{
            param, HostExpression(address), {}, {}, box, elementType, swizzle};
        for (const std::string &e : dims)
          map.dims.emplace_back(e);
        for (const std::string &e : strides)
          map.strides.emplace_back(e);
        maps.push_back(std::move(map));
      } catch (const std::invalid_argument &e) {
        throw py::value_error("kernel " + this->name + ": " + e.what());
      }
    }
    encoded.resize(maps.size());
    lastFields.resize(maps.size());
    const Driver &api = driver();
    context = primaryContext(device);
    makeCurrent(context);
    std::string data = image; // NUL-terminated, as PTX must be
    std::vector<char> log(8192, '\0');
    int options[] = {CU_JIT_ERROR_LOG_BUFFER,
                     CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log.data(), reinterpret_cast<void *>(log.size() - 1)};
    CUresult status =
        api.cuModuleLoadDataEx(&module, data.c_str(), 2, options, values);
    if (status != CUDA_SUCCESS)
      check(status, "cuModuleLoadDataEx for kernel " + this->name +
                        (log[0] ? ":\n" + std::string(log.data()) : ""));
    check(api.cuModuleGetFunction(&function, module, this->name.c_str()),
          "cuModuleGetFunction(" + this->name + ")");
    if (sharedMemory > kDefaultSharedMemoryLimit) {
      int limit = deviceAttribute(
          device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
      if (sharedMemory > limit)
        raiseCudaError(
            "kernel " + this->name + " needs " + std::to_string(sharedMemory) +
            " bytes of shared memory; device " + std::to_string(device) +
            " allows " + std::to_string(limit));
      check(api.cuFuncSetAttribute(
                function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                sharedMemory),
            "cuFuncSetAttribute(max dynamic shared memory)");
    }
  }
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;
  ~Kernel() {
    // Best effort: at interpreter exit the context may already be gone.
    if (module)
      driver().cuModuleUnload(module);
  }

  int attribute(int which) const {
    int value = 0;
    check(driver().cuFuncGetAttribute(&value, which, function),
          "cuFuncGetAttribute");
    return value;
  }

  /// Launches on `stream` (a CUstream/cudaStream_t as an integer).
  void launch(unsigned gridX, unsigned gridY, unsigned gridZ,
              std::uintptr_t stream, const py::tuple &args) const {
    // The kernel's .reqnctapercluster groups the programs; the driver
    // would reject a grid that does not split into whole clusters.
    if (gridX % cluster)
      throw py::value_error(
          "kernel " + name + " runs its programs in clusters of " +
          std::to_string(cluster) +
          " along grid axis 0, so the grid's first "
          "size must be a multiple of " +
          std::to_string(cluster) + ", got " + std::to_string(gridX));
    size_t count = signature.size();
    if (args.size() != count)
      throw py::type_error("kernel " + name + " takes " +
                           std::to_string(count) + " arguments, got " +
                           std::to_string(args.size()));
    union Slot {
      std::uint64_t pointer;
      std::int32_t i32;
      std::int64_t i64;
      float f32;
    };
    constexpr size_t kInline = 32;
    Slot inlineSlots[kInline];
    void *inlineParams[kInline];
    std::vector<Slot> heapSlots;
    std::vector<void *> heapParams;
    Slot *slots = inlineSlots;
    void **params = inlineParams;
    if (count > kInline) {
      heapSlots.resize(count);
      heapParams.resize(count);
      slots = heapSlots.data();
      params = heapParams.data();
    }
    for (size_t i = 0; i < count; ++i) {
      PyObject *arg = PyTuple_GET_ITEM(args.ptr(), i);
      Slot &slot = slots[i];
      switch (signature[i]) {
      case 'P':
        slot.pointer = PyLong_AsUnsignedLongLong(arg);
        break;
      case 'i': {
        long long v = PyLong_AsLongLong(arg);
        if (!PyErr_Occurred() && (v < INT32_MIN || v > INT32_MAX))
          PyErr_SetString(PyExc_OverflowError, "does not fit in i32");
        slot.i32 = static_cast<std::int32_t>(v);
        break;
      }
      case 'l':
        slot.i64 = PyLong_AsLongLong(arg);
        break;
      default:
        slot.f32 = static_cast<float>(PyFloat_AsDouble(arg));
        break;
      }
      if (PyErr_Occurred()) {
        PyObject *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace);
        std::string why = value ? py::str(value).cast<std::string>() : "";
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(trace);
        throw py::type_error("kernel " + name + ", argument " +
                             std::to_string(i) + " (" + signature[i] +
                             "): " + why);
      }
      params[i] = &slot;
    }
    const Driver &api = driver();
    std::vector<void *> withMaps;
    if (!maps.empty()) {
      encodeMaps(slots);
      withMaps.assign(params, params + count);
      for (EncodedMap &map : encoded)
        withMaps.push_back(&map);
      params = withMaps.data();
    }
    makeCurrent(context);
    if (earlyLaunch && earlyLaunchWorks && api.cuLaunchKernelEx) {
      // The kernel waits for the previous one itself (griddepcontrol.wait).
      CUlaunchAttribute early{};
      early.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
      early.value.flag = 1;
      CUlaunchConfig config{gridX,
                            gridY,
                            gridZ,
                            static_cast<unsigned>(threads),
                            1,
                            1,
                            static_cast<unsigned>(sharedMemory),
                            reinterpret_cast<CUstream>(stream),
                            &early,
                            1};
      if (api.cuLaunchKernelEx(&config, function, params, nullptr) ==
          CUDA_SUCCESS)
        return;
      // A driver that refuses the early start: the kernel is launched
      // plainly from now on (its wait then returns at once), and an error
      // of the launch itself is the plain launch's to report.
      earlyLaunchWorks = false;
    }
    check(api.cuLaunchKernel(function, gridX, gridY, gridZ, threads, 1, 1,
                             sharedMemory, reinterpret_cast<CUstream>(stream),
                             params, nullptr),
          "cuLaunchKernel(" + name + ")");
  }

  const std::string name, signature;
  const int device, threads, sharedMemory, cluster;
  /// Launched with programmatic stream serialisation (the PTX header's
  /// early_launch=1).
  const bool earlyLaunch;

private:
  /// Cleared when the driver refuses an early launch.
  mutable bool earlyLaunchWorks = true;
  /// Encodes each host tensor map for the arguments in `slots` (a map whose
  /// fields did not change since the last launch is kept as it is).
  template <typename Slot> void encodeMaps(const Slot *slots) const {
    std::vector<std::int64_t> args(signature.size());
    std::vector<bool> integer(signature.size());
    for (size_t i = 0; i < signature.size(); ++i) {
      integer[i] = signature[i] != 'f';
      args[i] = signature[i] == 'P'   ? std::int64_t(slots[i].pointer)
                : signature[i] == 'i' ? slots[i].i32
                : signature[i] == 'l' ? slots[i].i64
                                      : 0;
    }
    for (size_t m = 0; m < maps.size(); ++m) {
      const HostTensorMap &map = maps[m];
      TensorMapFields fields;
      try {
        fields = map.fields(args, integer);
      } catch (const std::invalid_argument &e) {
        throw py::value_error("kernel " + name + ": " + e.what());
      }
      if (fields == lastFields[m])
        continue;
      // The call and its fields, for errors only (not built per launch).
      auto what = [&] {
        std::string text = "cuTensorMapEncodeTiled(" + name + ", parameter " +
                           std::to_string(map.param) + ": address " +
                           std::to_string(fields.address) + ", extents";
        for (std::uint64_t d : fields.dims)
          text += " " + std::to_string(d);
        text += ", byte strides";
        for (std::uint64_t s : fields.strides)
          text += " " + std::to_string(s);
        return text + ")";
      };
      for (std::uint64_t d : fields.dims)
        if (d == 0) {
          PyErr_SetString(emptyMapErrorType,
                          (what() + ": the driver encodes no tensor map with "
                                    "an empty dimension; build the maps on "
                                    "the device (SAGE_TENSOR_MAPS=device)")
                              .c_str());
          throw py::error_already_set();
        }
      const Driver &api = driver();
      if (!api.cuTensorMapEncodeTiled)
        raiseCudaError("kernel " + name +
                       " needs cuTensorMapEncodeTiled "
                       "(CUDA 12.0 or newer driver)");
      std::vector<std::uint32_t> unit(fields.dims.size(), 1);
      CUresult status = api.cuTensorMapEncodeTiled(
          encoded[m].bytes, map.elementType, std::uint32_t(fields.dims.size()),
          reinterpret_cast<void *>(fields.address), fields.dims.data(),
          fields.strides.data(), map.box.data(), unit.data(),
          CU_TENSOR_MAP_INTERLEAVE_NONE, map.swizzle,
          CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
      if (status != CUDA_SUCCESS)
        check(status, what());
      lastFields[m] = std::move(fields);
    }
  }

  std::vector<HostTensorMap> maps;
  /// The maps of the last launch and the fields they were encoded from
  /// (launches hold the GIL: one at a time per kernel).
  mutable std::vector<EncodedMap> encoded;
  mutable std::vector<TensorMapFields> lastFields;
  CUcontext context = nullptr;
  CUmodule module = nullptr;
  CUfunction function = nullptr;
};
} // namespace

void sage::python::registerDriver(py::module_ &m) {
  // Kept alive for the life of the process (the module holds a reference).
  cudaErrorType =
      PyErr_NewException("sage._sage.CudaError", PyExc_RuntimeError, nullptr);
  if (!cudaErrorType)
    throw py::error_already_set();
  m.attr("CudaError") = py::reinterpret_borrow<py::object>(cudaErrorType);
  emptyMapErrorType = PyErr_NewException("sage._sage.EmptyTensorMapError",
                                         PyExc_ValueError, nullptr);
  if (!emptyMapErrorType)
    throw py::error_already_set();
  m.attr("EmptyTensorMapError") =
      py::reinterpret_borrow<py::object>(emptyMapErrorType);

  m.def(
      "cuda_available",
      [] {
        try {
          driver();
          int count = 0;
          return driver().cuDeviceGetCount(&count) == CUDA_SUCCESS && count > 0;
        } catch (py::error_already_set &) {
          return false;
        }
      },
      "True when libcuda.so.1 loads, initialises and sees a device");
  m.def(
      "driver_version",
      [] {
        int version = 0;
        check(driver().cuDriverGetVersion(&version), "cuDriverGetVersion");
        return version;
      },
      "The CUDA driver's version (e.g. 13000)");
  m.def(
      "device_count",
      [] {
        int count = 0;
        check(driver().cuDeviceGetCount(&count), "cuDeviceGetCount");
        return count;
      },
      "Number of CUDA devices");
  m.def(
      "device_capability",
      [](int device) {
        return py::make_tuple(
            deviceAttribute(device,
                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            deviceAttribute(device,
                            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR));
      },
      py::arg("device"), "(major, minor) compute capability of a device");
  m.def(
      "pointer_device",
      [](std::uint64_t pointer) {
        const Driver &api = driver();
        unsigned memoryType = 0;
        if (api.cuPointerGetAttribute(&memoryType,
                                      CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                      pointer) != CUDA_SUCCESS ||
            memoryType == CU_MEMORYTYPE_HOST)
          return -1;
        int ordinal = -1;
        if (api.cuPointerGetAttribute(&ordinal,
                                      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                      pointer) != CUDA_SUCCESS)
          return -1;
        return ordinal;
      },
      py::arg("pointer"),
      "The device ordinal owning a pointer, -1 for host or unknown memory");
  m.def(
      "evaluate_host_expression",
      [](const std::string &text, const std::vector<std::int64_t> &args) {
        try {
          return HostExpression(text).evaluate(
              args, std::vector<bool>(args.size(), true));
        } catch (const std::invalid_argument &e) {
          throw py::value_error(e.what());
        }
      },
      py::arg("text"), py::arg("args"),
      "The value of a host tensor map expression for integer arguments "
      "(what a launch computes; for tests)");
  m.def(
      "synchronize",
      [](int device) {
        makeCurrent(primaryContext(device));
        check(driver().cuCtxSynchronize(), "cuCtxSynchronize");
      },
      py::arg("device") = 0, "Waits for all work on a device");

  py::class_<Kernel>(m, "Kernel",
                     "A kernel loaded from a cubin or PTX image on a device")
      .def(py::init<const py::bytes &, std::string, int, int, int, std::string,
                    const std::vector<MapSpec> &, int, bool>(),
           py::arg("image"), py::arg("name"), py::arg("device"),
           py::arg("threads"), py::arg("shared_memory"), py::arg("signature"),
           py::arg("tensor_maps") = std::vector<MapSpec>(),
           py::arg("cluster") = 1, py::arg("early_launch") = false)
      .def_readonly("name", &Kernel::name)
      .def_readonly("signature", &Kernel::signature)
      .def_readonly("device", &Kernel::device)
      .def_readonly("threads", &Kernel::threads)
      .def_readonly("shared_memory", &Kernel::sharedMemory)
      .def_readonly("cluster", &Kernel::cluster)
      .def_readonly("early_launch", &Kernel::earlyLaunch)
      .def_property_readonly("num_regs",
                             [](const Kernel &k) {
                               return k.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS);
                             })
      .def_property_readonly("local_memory",
                             [](const Kernel &k) {
                               return k.attribute(
                                   CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
                             })
      .def("launch", &Kernel::launch, py::arg("grid_x"), py::arg("grid_y"),
           py::arg("grid_z"), py::arg("stream"), py::arg("args"),
           "Launches with packed arguments on a stream (an integer handle)");
}
