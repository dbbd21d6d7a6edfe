/* tilecute's call path for a kernel's TVM FFI function (docs/performance.md, "The call's
 * argument conversion").
 *
 * TVM FFI's Python binding converts each torch tensor argument by asking torch for an owning
 * DLPack tensor (an allocation in torch) and wrapping it in an ffi.Tensor (one in TVM FFI),
 * both freed after the call: most of what a launch costs in Python.  The DLPack C exchange
 * API that torch exports (torch.Tensor.__dlpack_c_exchange_api__) also has
 * dltensor_from_py_object_no_sync, which fills a DLTensor on the caller's stack, and
 * current_work_stream.  This callable uses those: each torch.Tensor argument becomes a
 * DLTensor* (kTVMFFIDLTensorPtr, which the launcher reads like an ffi.Tensor), ints, floats,
 * bools and None are passed as values, the current torch stream of the first non-CPU tensor's
 * device is passed as the launcher's optional trailing stream argument (TVM FFI would set it
 * as the environment stream: the launcher uses either the same way) unless the call gave one
 * (an int handle after the parameters, as Kernel.launch passes it), and the same TVM FFI
 * function is called through TVMFFIFunctionCall, the GIL released around it unless the kernel
 * holds it (release_gil).
 *
 * Anything else -- another argument count, keyword arguments, a tensor subclass, an object of
 * another framework, an int that does not fit int64, a conversion torch refuses -- goes to the
 * TVM FFI function itself, unchanged: the call is the same, only slower.  An error the
 * launcher raises becomes the Python exception TVM FFI would raise (make_error builds it from
 * the error's kind, message and backtrace).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <dlpack/dlpack.h>
#include <tvm/ffi/c_api.h>

#define TC_MAX_ARGS 64

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* func;        /* the tvm_ffi.Function: the fallback; keeps the handle alive */
  void* handle;          /* its TVMFFIObjectHandle */
  PyObject* tensor_type; /* torch.Tensor: the exact type converted here */
  const DLPackExchangeAPI* api;
  PyObject* make_error;  /* (kind, message, backtrace) -> the exception TVM FFI raises */
  int num_args;          /* the launcher's parameters; a call with another count falls back */
  char release_gil;      /* let go of the GIL around the call (TVM FFI's release_gil) */
} FastCall;

static PyObject* fallback(FastCall* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  return PyObject_Vectorcall(self->func, args, nargsf, kwnames);
}

static PyObject* byte_array_str(const TVMFFIByteArray* a) {
  return PyUnicode_DecodeUTF8(a->data, (Py_ssize_t)a->size, "replace");
}

/* The error the call raised (TVMFFIErrorMoveFromRaised), as the Python exception TVM FFI's
 * binding makes of it. */
static PyObject* raise_ffi_error(FastCall* self) {
  TVMFFIObjectHandle error = NULL;
  TVMFFIErrorMoveFromRaised(&error);
  if (error == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "tilecute: the kernel's launcher failed without an error");
    return NULL;
  }
  /* (TVMFFIErrorGetCellPtr, which c_api.h declares for C++ only) */
  const TVMFFIErrorCell* cell = (const TVMFFIErrorCell*)((const char*)error + sizeof(TVMFFIObject));
  PyObject* kind = byte_array_str(&cell->kind);
  PyObject* message = byte_array_str(&cell->message);
  PyObject* backtrace = byte_array_str(&cell->backtrace);
  TVMFFIObjectDecRef(error);
  PyObject* exc = NULL;
  if (kind != NULL && message != NULL && backtrace != NULL) {
    exc = PyObject_CallFunctionObjArgs(self->make_error, kind, message, backtrace, NULL);
  }
  Py_XDECREF(kind);
  Py_XDECREF(message);
  Py_XDECREF(backtrace);
  if (exc == NULL) return NULL;
  PyErr_SetObject((PyObject*)Py_TYPE(exc), exc);
  Py_DECREF(exc);
  return NULL;
}

static PyObject* fastcall_vectorcall(PyObject* callable, PyObject* const* args, size_t nargsf,
                                     PyObject* kwnames) {
  FastCall* self = (FastCall*)callable;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  /* the parameters, and optionally an explicit stream as an int handle (Kernel.launch) */
  int explicit_stream = n == self->num_args + 1 && PyLong_CheckExact(args[n - 1]);
  if (explicit_stream) n -= 1;
  if (kwnames != NULL || n != self->num_args) {
    return fallback(self, args, nargsf, kwnames);
  }
  TVMFFIAny packed[TC_MAX_ARGS + 1];
  DLTensor tensors[TC_MAX_ARGS];
  int32_t device_type = -1, device_id = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* arg = args[i];
    TVMFFIAny* out = &packed[i];
    out->zero_padding = 0;
    out->v_int64 = 0;
    if ((PyObject*)Py_TYPE(arg) == self->tensor_type) {
      if (self->api->dltensor_from_py_object_no_sync(arg, &tensors[i]) != 0) {
        PyErr_Clear(); /* TVM FFI's own conversion raises its error */
        return fallback(self, args, nargsf, kwnames);
      }
      out->type_index = kTVMFFIDLTensorPtr;
      out->v_ptr = &tensors[i];
      if (device_type == -1 && tensors[i].device.device_type != kDLCPU) {
        device_type = tensors[i].device.device_type;
        device_id = tensors[i].device.device_id;
      }
    } else if (PyLong_CheckExact(arg)) {
      int overflow = 0;
      long long value = PyLong_AsLongLongAndOverflow(arg, &overflow);
      if (overflow != 0 || (value == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return fallback(self, args, nargsf, kwnames);
      }
      out->type_index = kTVMFFIInt;
      out->v_int64 = value;
    } else if (PyFloat_CheckExact(arg)) {
      out->type_index = kTVMFFIFloat;
      out->v_float64 = PyFloat_AS_DOUBLE(arg);
    } else if (PyBool_Check(arg)) {
      out->type_index = kTVMFFIBool;
      out->v_int64 = arg == Py_True;
    } else if (arg == Py_None) {
      out->type_index = kTVMFFINone;
    } else {
      return fallback(self, args, nargsf, kwnames);
    }
  }
  int32_t num_packed = (int32_t)n;
  if (explicit_stream) {
    int overflow = 0;
    long long handle = PyLong_AsLongLongAndOverflow(args[n], &overflow);
    if (overflow != 0 || (handle == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return fallback(self, args, nargsf, kwnames);
    }
    packed[n].type_index = kTVMFFIInt; /* (a negative handle: the launcher's error) */
    packed[n].zero_padding = 0;
    packed[n].v_int64 = handle;
    num_packed += 1;
  } else if (device_type != -1) {
    void* stream = NULL;
    if (self->api->current_work_stream((DLDeviceType)device_type, device_id, &stream) != 0) {
      PyErr_Clear();
      return fallback(self, args, nargsf, kwnames);
    }
    packed[n].type_index = kTVMFFIOpaquePtr;
    packed[n].zero_padding = 0;
    packed[n].v_int64 = 0;
    packed[n].v_ptr = stream;
    num_packed += 1;
  }
  TVMFFIAny result;
  result.type_index = kTVMFFINone;
  result.zero_padding = 0;
  result.v_int64 = 0;
  int status;
  if (self->release_gil) {
    Py_BEGIN_ALLOW_THREADS
    status = TVMFFIFunctionCall(self->handle, packed, num_packed, &result);
    Py_END_ALLOW_THREADS
  } else {
    status = TVMFFIFunctionCall(self->handle, packed, num_packed, &result);
  }
  if (status == -2) return NULL; /* a Python error is set already */
  if (status != 0) return raise_ffi_error(self);
  if (result.type_index >= kTVMFFIStaticObjectBegin) TVMFFIObjectDecRef(result.v_obj);
  if (result.type_index != kTVMFFINone) {
    PyErr_SetString(PyExc_RuntimeError, "tilecute: a kernel's launcher returned a value");
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyObject* fastcall_call(PyObject* callable, PyObject* args, PyObject* kwargs) {
  return PyVectorcall_Call(callable, args, kwargs);
}

static int fastcall_traverse(FastCall* self, visitproc visit, void* arg) {
  Py_VISIT(self->func);
  Py_VISIT(self->tensor_type);
  Py_VISIT(self->make_error);
  return 0;
}

static int fastcall_clear(FastCall* self) {
  Py_CLEAR(self->func);
  Py_CLEAR(self->tensor_type);
  Py_CLEAR(self->make_error);
  return 0;
}

static void fastcall_dealloc(FastCall* self) {
  PyObject_GC_UnTrack(self);
  fastcall_clear(self);
  Py_TYPE(self)->tp_free((PyObject*)self);
}

static PyObject* fastcall_repr(FastCall* self) {
  return PyUnicode_FromFormat("<tilecute fast call of %R>", self->func);
}

static PyMemberDef fastcall_members[] = {
    {"release_gil", T_BOOL, offsetof(FastCall, release_gil), 0,
     "let go of the GIL around the launcher's call"},
    {"function", T_OBJECT, offsetof(FastCall, func), READONLY, "the TVM FFI function"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject FastCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tilecute_fastcall.FastCall",
    .tp_basicsize = sizeof(FastCall),
    .tp_dealloc = (destructor)fastcall_dealloc,
    .tp_vectorcall_offset = offsetof(FastCall, vectorcall),
    .tp_repr = (reprfunc)fastcall_repr,
    .tp_call = fastcall_call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A kernel's TVM FFI function, called with torch tensors as DLTensor pointers",
    .tp_traverse = (traverseproc)fastcall_traverse,
    .tp_clear = (inquiry)fastcall_clear,
    .tp_members = fastcall_members,
};

/* make(func, handle, tensor_type, api_capsule, make_error, num_args, release_gil) */
static PyObject* make(PyObject* module, PyObject* args) {
  (void)module;
  PyObject *func, *tensor_type, *capsule, *make_error;
  unsigned long long handle;
  int num_args, release_gil;
  if (!PyArg_ParseTuple(args, "OKOOOip", &func, &handle, &tensor_type, &capsule, &make_error,
                        &num_args, &release_gil)) {
    return NULL;
  }
  const DLPackExchangeAPI* api =
      (const DLPackExchangeAPI*)PyCapsule_GetPointer(capsule, "dlpack_exchange_api");
  if (api == NULL) return NULL;
  if (api->header.version.major != DLPACK_MAJOR_VERSION || api->dltensor_from_py_object_no_sync == NULL ||
      api->current_work_stream == NULL) {
    Py_RETURN_NONE; /* an exchange API this build does not know: TVM FFI's path */
  }
  if (num_args < 0 || num_args > TC_MAX_ARGS) Py_RETURN_NONE;
  FastCall* self = PyObject_GC_New(FastCall, &FastCallType);
  if (self == NULL) return NULL;
  self->vectorcall = fastcall_vectorcall;
  Py_INCREF(func);
  self->func = func;
  self->handle = (void*)(uintptr_t)handle;
  Py_INCREF(tensor_type);
  self->tensor_type = tensor_type;
  self->api = api;
  Py_INCREF(make_error);
  self->make_error = make_error;
  self->num_args = num_args;
  self->release_gil = (char)(release_gil != 0);
  PyObject_GC_Track(self);
  return (PyObject*)self;
}

static PyMethodDef module_methods[] = {
    {"make", make, METH_VARARGS,
     "make(func, handle, tensor_type, api_capsule, make_error, num_args, release_gil): a "
     "FastCall, or None when the exchange API lacks what it needs"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tilecute_fastcall", "tilecute's call path for kernels' TVM FFI functions",
    -1, module_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit_tilecute_fastcall(void) {
  if (PyType_Ready(&FastCallType) < 0) return NULL;
  PyObject* m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  PyModule_AddIntConstant(m, "MAX_ARGS", TC_MAX_ARGS);
  return m;
}
