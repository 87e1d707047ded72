# Spack recipe for MTK (Mesh Tensors on Kokkos). From the MTK source root:
#   spack repo add spack
#   spack install mtk                               # the newest release: Serial Kokkos, host BLAS
#   spack install mtk+shared                        # MTK's libraries shared instead of static
#   spack install mtk+bf16                          # with oneDNN's bf16 matmul (AVX512_BF16/AMX)
#   spack install mtk+cuda cuda_arch=90             # Kokkos 4 with CUDA, nvcc_wrapper, cuBLAS
#   spack install mtk+cuda+cuda_aware_mpi cuda_arch=90   # MPI gets device pointers
#   spack install mtk+rocm amdgpu_target=gfx90a     # Kokkos 4 with HIP, rocBLAS
#   spack install --test=root mtk                   # also builds and runs the CTest suite
#   spack test run mtk                              # stand-alone: mtk-mesh-demo on 2 ranks
# docs/building.md ("Spack") has the offline Debian 12 setup this recipe is checked with.

import os

from spack.package import *

try:  # Spack >= 1.0 keeps the build systems in the builtin package repository.
    from spack_repo.builtin.build_systems.cmake import CMakePackage
    from spack_repo.builtin.build_systems.cuda import CudaPackage
    from spack_repo.builtin.build_systems.rocm import ROCmPackage
except ImportError:  # Spack 0.x exports them from spack.package.
    pass


class Mtk(CMakePackage, CudaPackage, ROCmPackage):
    """Mesh Tensors on Kokkos: Mesh-TensorFlow's named-dimension model of distributed tensors
    as a C++17 library on Kokkos, MPI and parallel HDF5, with its applications."""

    # Placeholder host until MTK has a public home. Release tarballs are mtk-<version>.tar.gz
    # with a top directory mtk-<version>/, made by scripts/release. Spack looks in its mirrors
    # before this url, at <mirror>/mtk/mtk-<version>.tar.gz (the `spack mirror` layout): a site
    # puts the tarball there (docs/building.md, "Releases").
    homepage = "https://example.org/mtk"
    url = "https://example.org/mtk/releases/mtk-0.4.0.tar.gz"
    git = "https://example.org/mtk/mtk.git"

    # LICENSE (Apache-2.0) covers every file (NOTICE); it is in the tarball and installed to
    # share/doc/mtk. The maintainers' GitHub handle is a placeholder like the url above, until
    # MTK has a public home: Spack pings it on changes to this recipe.
    license("Apache-2.0", checked_by="mtk-maintainers")
    maintainers("mtk-maintainers")

    # A checkout: `spack develop mtk@main` (spack/debian12/spack.yaml does).
    version("main", branch="main")
    # The newest release is project(MTK VERSION ...) of CMakeLists.txt. Its sha256 is what
    # `scripts/release` prints for the release commit; `scripts/release --check <commit>`
    # compares. spack/ is export-ignore'd, so adding a line does not change the tarball.
    # 0.4.0: the tree of 6cbebfbb (scripts/release 6cbebfbb): mtk-fmnist, mesh: auto,
    # model.loss_chunks, halo traffic in the cost model.
    version("0.4.0", sha256="ad91151451e61ebb46f34c8498c1432854156ad5fd74b684e03a3d2a93fcfaef")
    # 0.3.0: the tree of cd504fb9 (scripts/release cd504fb9).
    version("0.3.0", sha256="894596803a34ab146e6e8fc80e746fa59aff8eaad6914b9d2504d546edfdf27e")
    # `git archive --format=tar.gz --prefix=mtk-0.1.0/ f79b9f0` (before scripts/release): no
    # mtk-wmt, Slurm scripts, layout search or CLI11.
    version(
        "0.1.0",
        sha256="58fa2856c99fd84a95bb1bd88be1db4a5a52477ed54cbf9ee3785e612a0397be",
        deprecated=True,
    )

    variant("openmp", default=False, description="Use Kokkos' OpenMP host backend")
    variant(
        "shared",
        default=False,
        description="MTK's libraries (MTK::engine, MTK::models, MTK::io) as shared libraries",
    )
    variant(
        "bf16",
        default=False,
        description="oneDNN's matmul: fp32 contractions where it has AVX-512 brgemm kernels "
        "(about 2x OpenBLAS there) and bf16 ones on CPUs with AVX512_BF16/AMX (without it fp32 "
        "runs through the BLAS and bf16 contractions are emulated through the fp32 gemm)",
    )
    variant(
        "cuda_aware_mpi",
        default=False,
        when="+cuda",
        description="Hand device buffers straight to MPI (the MPI must be CUDA-aware)",
    )

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.17:", type="build")  # 3.16 for MTK; 3.17 for ctest --no-tests=error
    depends_on("pkgconfig", type="build")  # SentencePiece is found through sentencepiece.pc
    depends_on("cli11@2.1:2", type="build")  # the applications' command lines (header-only)
    depends_on("nlohmann-json@3.2:3", type="build")  # metrics.jsonl and BLEU's JSON (header-only)
    depends_on("xxhash@0.8:", type="build")  # XXH3 checksums of token shards (header-only)

    depends_on("mpi")
    # Built with 1.10.8 (Debian 12) only. Open to 1.14 and 2.x (Spack's newest, 2.1.0): MTK
    # calls long-standing C functions under their versioned names (H5Dopen2, H5Ewalk2, ...);
    # never built against them.
    depends_on("hdf5@1.10:2 +mpi")
    depends_on("yaml-cpp@0.6.3:0.8")
    depends_on("zlib-api")  # text corpora read plain or gzip-compressed (mtk-wmt, mtk-lm1b)
    depends_on("openssl")  # SHA-256 of checkpoints and token shards (libcrypto's EVP)
    # Tested with 0.1.97 (Debian 12); the C++ API MTK uses is unchanged in 0.2.
    depends_on("sentencepiece@0.1.91:0.2")

    # Built with Kokkos 3.4 (Serial, Debian 12) and 4.6 (OpenMP; CUDA compile-checked). The
    # range takes every 4.x Spack has (4.7.04 the newest). Kokkos 5 (5.1.1 in Spack) requires
    # C++20, MTK is C++17 and was never built against it: not accepted until it is.
    depends_on("kokkos@3.4:4")
    # KokkosBlas::gemm runs MTK's local einsums: without the BLAS third-party library it falls
    # back to its own loops on the host, far slower than the figures in docs/ assume.
    depends_on("kokkos-kernels@3.4:4 +blas")

    # Tested with oneDNN 2.6.3 (Debian 12); MTK uses the 2.x matmul API (matmul::desc).
    depends_on("onednn@2.6:2", when="+bf16")

    depends_on("kokkos+openmp", when="+openmp")
    depends_on("kokkos-kernels+openmp", when="+openmp")

    # MTK writes its kernels as KOKKOS_LAMBDA, compiled as C++ by the compiler Kokkos was built
    # for: nvcc_wrapper for CUDA (cuda_lambda is always on from Kokkos 5), hipcc for HIP.
    with when("+cuda"):
        depends_on("kokkos+cuda+cuda_lambda+wrapper")
        depends_on("kokkos-kernels+cuda+cublas")
        for _arch in CudaPackage.cuda_arch_values:
            depends_on(f"kokkos cuda_arch={_arch}", when=f"cuda_arch={_arch}")
            depends_on(f"kokkos-kernels cuda_arch={_arch}", when=f"cuda_arch={_arch}")
    with when("+rocm"):
        depends_on("kokkos+rocm")
        depends_on("kokkos-kernels+rocblas")
        for _target in ROCmPackage.amdgpu_targets:
            depends_on(f"kokkos amdgpu_target={_target}", when=f"amdgpu_target={_target}")

    conflicts("+cuda", when="cuda_arch=none", msg="mtk+cuda needs a cuda_arch, e.g. cuda_arch=90")
    conflicts(
        "+rocm", when="amdgpu_target=none", msg="mtk+rocm needs an amdgpu_target, e.g. gfx90a"
    )
    conflicts("+cuda", when="+rocm", msg="Kokkos has one device backend: CUDA or ROCm")
    conflicts("~cuda", when="^kokkos+cuda", msg="a CUDA Kokkos needs mtk+cuda cuda_arch=...")
    conflicts("~rocm", when="^kokkos+rocm", msg="a HIP Kokkos needs mtk+rocm amdgpu_target=...")
    conflicts(
        "^kokkos+cmake_lang",
        msg="MTK compiles its Kokkos code as C++ with Kokkos' compiler, not as a CMake "
        "CUDA/HIP language: use kokkos~cmake_lang",
    )

    # The installed scripts: share/mtk/scripts/plot-metrics (Python's standard library) and
    # scripts/slurm/generate, which reads the configs with PyYAML.
    depends_on("python@3:", type="run")
    depends_on("py-pyyaml", type="run")

    # Built and run only under `spack install --test=root` (MTK_ENABLE_TESTS follows run_tests).
    depends_on("googletest@1.10:", type="test")
    depends_on("python@3:", type="test")  # tests/architecture/check_layers.py

    def _mpiexec(self):
        """mpiexec of the MPI MTK is built with (mpirun where there is no mpiexec)."""
        for name in ("mpiexec", "mpirun"):
            path = join_path(self.spec["mpi"].prefix.bin, name)
            if os.path.exists(path):
                return path
        return which("mpiexec", "mpirun", required=True).path

    def cmake_args(self):
        spec = self.spec
        args = [
            self.define("MTK_ENABLE_APPS", True),
            self.define_from_variant("BUILD_SHARED_LIBS", "shared"),
            self.define("MTK_ENABLE_BENCHMARKS", False),
            self.define("MTK_ENABLE_TESTS", self.run_tests),
            # the examples test installs MTK into a scratch prefix of its own
            self.define("MTK_ENABLE_EXAMPLES", False),
            self.define("Kokkos_ROOT", spec["kokkos"].prefix),
            self.define("KokkosKernels_ROOT", spec["kokkos-kernels"].prefix),
            self.define("MPI_C_COMPILER", spec["mpi"].mpicc),
            self.define("MPI_CXX_COMPILER", spec["mpi"].mpicxx),
            self.define("MPIEXEC_EXECUTABLE", self._mpiexec()),
            # HDF5_ROOT limits FindHDF5 to this prefix (works without h5pcc in <prefix>/bin, as
            # for Debian's /usr/lib/x86_64-linux-gnu/hdf5/mpich); MTK checks it is parallel.
            self.define("HDF5_ROOT", spec["hdf5"].prefix),
            self.define("HDF5_PREFER_PARALLEL", True),
            self.define("MTK_ENABLE_ONEDNN", "ON" if spec.satisfies("+bf16") else "OFF"),
            # Spack's compiler wrapper already passes the target's flags (e.g. -march=znver3)
            self.define("MTK_NATIVE_ARCH", False),
        ]
        if spec.satisfies("+cuda"):
            args.append(self.define("CMAKE_CXX_COMPILER", spec["kokkos"].package.kokkos_cxx))
            args.append(self.define_from_variant("MTK_ENABLE_CUDA_AWARE_MPI", "cuda_aware_mpi"))
            # Host/device mismatches stay errors; other warnings of a site's nvcc do not stop
            # the install.
            args.append(self.define("MTK_WARNINGS_AS_ERRORS", False))
        elif spec.satisfies("+rocm") and not (
            spec.satisfies("^kokkos %cxx=clang") or spec.satisfies("^kokkos %cxx=rocmcc")
        ):
            args.append(self.define("CMAKE_CXX_COMPILER", spec["hip"].hipcc))
        return args

    def check(self):
        """The CTest suite (GoogleTest, MPI tests at 1, 2, 4 and 8 ranks, shell tests of the
        applications), run in the build tree by `spack install --test=root`."""
        with working_dir(self.build_directory):
            ctest = Executable(join_path(self.spec["cmake"].prefix.bin, "ctest"))
            # --no-tests=error: a build tree configured without the tests (a develop build
            # reuses its tree) must fail here, not pass having run nothing.
            jobs = str(determine_number_of_jobs(parallel=True))
            ctest("--output-on-failure", "--no-tests=error", "-j", jobs)

    def test_mesh_demo(self):
        """mtk-mesh-demo on 2 MPI ranks: a 2-processor mesh, allreduce and allconcat checked
        against their closed forms"""
        mpiexec = Executable(self._mpiexec())
        demo = join_path(self.prefix.bin, "mtk-mesh-demo")
        out = mpiexec("-n", "2", demo, "--mesh", "batch:2", output=str.split, error=str.split)
        assert "mesh demo: OK" in out, f"mtk-mesh-demo did not report OK:\n{out}"

    def test_version(self):
        """mtk-layout --version names the version Spack installed (project() of CMakeLists.txt)"""
        layout = Executable(join_path(self.prefix.bin, "mtk-layout"))
        out = layout("--version", output=str.split, error=str.split)
        if not self.spec.satisfies("@main"):
            assert f"(MTK {self.spec.version})" in out, f"mtk-layout --version: {out}"

    def test_installed_tree(self):
        """share/mtk is an MTK_ROOT: every application's configs, layouts, Slurm scripts,
        plot-metrics; the installed generate writes scripts for another node shape"""
        share = join_path(self.prefix.share, "mtk")
        for rel in (
            "apps/lm1b/configs/paper_lm_3.yaml",
            "apps/wmt/configs/paper_tr_3.yaml",
            "layouts/paper-2d.yaml",
            "scripts/slurm/mtk-job.sh",
            "scripts/slurm/train.sbatch",
            "scripts/slurm/train-gpu.sbatch",
            "scripts/slurm/paper_tr_3.sbatch",
            "scripts/plot-metrics",
        ):
            assert os.path.isfile(join_path(share, rel)), f"share/mtk/{rel} was not installed"
        python = Executable(self.spec["python"].command.path)
        python(join_path(share, "scripts", "plot-metrics"), "--help", output=str.split)
        out_dir = join_path(os.getcwd(), "generated")
        python(
            join_path(share, "scripts", "slurm", "generate"),
            "--out",
            out_dir,
            "--tasks-per-node",
            "64",
            output=str.split,
            error=str.split,
        )
        assert os.path.isfile(join_path(out_dir, "paper_lm_3.sbatch")), "generate wrote nothing"

    def test_layout_help(self):
        """mtk-layout --help exits 0 and prints its usage"""
        layout = Executable(join_path(self.prefix.bin, "mtk-layout"))
        out = layout("--help", output=str.split, error=str.split)
        assert "mtk-layout" in out
