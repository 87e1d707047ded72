# Spack recipe for MTK (Mesh Tensors on Kokkos). Add this repository with `spack repo add spack`
# from the MTK source root, then `spack install mtk` (or `mtk+tests`).

from spack.package import *

try:  # Spack >= 1.0 keeps the build systems in the builtin package repository.
    from spack_repo.builtin.build_systems.cmake import CMakePackage
except ImportError:  # Older Spack exports them from spack.package.
    pass


class Mtk(CMakePackage):
    """Mesh Tensors on Kokkos: Mesh-TensorFlow's named-dimension model of distributed tensors
    as a C++17 library on Kokkos and MPI, with its applications."""

    # Placeholders: set these to where MTK is published before installing from them.
    homepage = "https://example.org/mtk"
    git = "https://example.org/mtk/mtk.git"

    version("main", branch="main")

    variant("tests", default=False, description="Build the GoogleTest suite (MTK_ENABLE_TESTS)")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.16:", type="build")
    depends_on("pkgconfig", type="build")  # SentencePiece is found through pkg-config

    depends_on("mpi")
    depends_on("kokkos@3.4:")
    # Kokkos Kernels calls a BLAS for host matrix products only when built with its +blas
    # variant: for that, install with `^kokkos-kernels+blas`.
    depends_on("kokkos-kernels@3.4:")
    depends_on("blas")
    depends_on("hdf5+mpi")
    depends_on("yaml-cpp")
    depends_on("sentencepiece")
    depends_on("googletest", when="+tests")

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix),
            self.define("HDF5_PREFER_PARALLEL", True),
            self.define_from_variant("MTK_ENABLE_TESTS", "tests"),
            # the examples test installs into a scratch prefix: not inside a Spack build
            self.define("MTK_ENABLE_EXAMPLES", False),
        ]
        # A CUDA Kokkos compiles device lambdas with the compiler it was built for (its
        # nvcc_wrapper when built +wrapper).
        if spec.satisfies("^kokkos+cuda"):
            kokkos_cxx = getattr(spec["kokkos"].package, "kokkos_cxx", None)
            if kokkos_cxx:
                args.append(self.define("CMAKE_CXX_COMPILER", kokkos_cxx))
        return args
