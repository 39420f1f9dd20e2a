"""The ninth corpus, seventh blind batch (issue 27): libraries the earlier corpora do not use,
expectations written before ipydevice ran on them, by an author who had not read the engine,
the changelog or the architecture notes.

Libraries new to the corpus: auraloss (``MultiResolutionSTFTLoss``, the ``FIRFilter``
pre-emphasis with ``ESRLoss``), pytorch-msssim (``ssim`` in a denoising loop, ``MS_SSIM`` in a
mixed MS-SSIM + L1 criterion), julius (``LowPassFilter`` bands, ``ResampleFrac`` in a
``Dataset``), roma (``unitquat_slerp``, ``rigid_points_registration``), ncps (``CfC`` with an
initial state, a wired ``CfC`` over an ``AutoNCP`` wiring carrying its state between chunks),
kmeans-pytorch (``kmeans``, ``pairwise_distance``), torch-pca (``PCA`` fitted, moved with its
own ``to``, ``transform``) and product-key-memory (``PKM`` with a trainable-memory mask, a PKM
layer swapped into a block); in ``realworld_cases9b.py`` plain PyTorch and the quiet cases.
Shapes: a clean target left on the CPU next to a model output, a pre-emphasis filter module
never moved, a loader whose targets stay on the CPU, a Gaussian kernel kept as a plain
attribute of a criterion, filters held in a plain list, a resampler moved to the GPU and then
used in a ``Dataset`` (the CPU is the target), interpolation steps from ``linspace``,
registration weights from numpy, an initial state made as the docs show, a recurrent state
carried between chunks on the CPU, cluster centres a library hands back on the CPU, a distance
helper whose default device is the CPU, a PCA fitted on CPU features, queries from numpy
against a PCA moved to the GPU, a memory mask built without a device and a layer put into a
model after the model moved.

``classes`` is ``(0,)`` throughout: the author did not assign issue 27's mechanism numbers.
Cases on ``openreg`` (``standin=True``) are those whose library or fix reads tensor values
(k-means loops, roma's slerp with its data-dependent masks, indexing a CPU mask with device
indices) or whose operator fake CUDA does not check (convolutions); ``openreg:0`` stands for
the report's GPU (in ``realworld_cases9b.py`` also the training steps, which fake CUDA runs
without gradients, ``_foreach`` ops and ``torch.func``'s stacking). Each case's comment quotes the error the cell raised, as checked before ipydevice ever ran
on it.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

#: A tiny 1-D convolutional denoiser for the audio cases.
DENOISER = """
        denoiser = nn.Sequential(nn.Conv1d(1, 8, 9, padding=4), nn.Tanh(),
                                 nn.Conv1d(8, 1, 9, padding=4)).to(device)
"""

CASES: list[Case] = [
    # -- auraloss -------------------------------------------------------------------------
    # Verified: stft input and window must be on the same device but got self on cpu and
    # window on cuda:0
    Case(
        id="auraloss-mrstft-clean-target-left-on-the-cpu",
        url="https://github.com/facebookresearch/denoiser/issues/27",
        classes=(0,),
        setup="""
        import auraloss
        device = 'cuda'
        """
        + DENOISER
        + """
        mrstft = auraloss.freq.MultiResolutionSTFTLoss(fft_sizes=[256, 128], hop_sizes=[64, 32],
                                                       win_lengths=[256, 128])
        noisy = torch.randn(2, 1, 2048).to(device)
        clean = torch.randn(2, 1, 2048)          # the reference recordings, loaded separately
        """,
        cell="""
        estimate = denoiser(noisy)
        loss = mrstft(estimate, clean) + 0.5 * F.l1_loss(estimate, clean)
        """,
        culprit="clean",
        checks=("estimate", "loss"),
        needs=("auraloss",),
    ),
    # Verified: Expected all tensors to be on the same device, but got weight is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1__convolution)
    Case(
        id="auraloss-pre-emphasis-filter-never-moved",
        url="https://github.com/csteinmetz1/auraloss/issues/17",
        classes=(0,),
        setup=OPENREG
        + """
        from auraloss.perceptual import FIRFilter
        from auraloss.time import ESRLoss
        """
        + DENOISER
        + """
        pre_emphasis = FIRFilter(filter_type='hp', coef=0.85, fs=16000, ntaps=3)
        esr = ESRLoss()
        noisy = torch.randn(2, 1, 1024).to(device)
        target = torch.randn(2, 1, 1024).to(device)
        """,
        cell="""
        estimate = denoiser(noisy)
        est_hp, target_hp = pre_emphasis(estimate, target)
        loss = esr(est_hp, target_hp)
        """,
        culprit="pre_emphasis",
        target="openreg:0",
        checks=("est_hp", "loss"),
        fake=False,
        standin=True,
        needs=("auraloss",),
    ),
    # -- pytorch-msssim -------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="msssim-ssim-loss-clean-batch-from-the-loader",
        url="https://github.com/Po-Hsun-Su/pytorch-ssim/issues/19",
        classes=(0,),
        setup="""
        from pytorch_msssim import ssim
        device = 'cuda'
        net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                            nn.Conv2d(16, 3, 3, padding=1), nn.Sigmoid()).to(device)
        pairs = TensorDataset(torch.rand(4, 3, 32, 32), torch.rand(4, 3, 32, 32))
        loader = DataLoader(pairs, batch_size=2)
        """,
        cell="""
        for noisy, clean in loader:
            restored = net(noisy.to(device))
            loss = 1 - ssim(restored, clean, data_range=1.0, size_average=True)
        """,
        culprit="clean",
        checks=("restored", "loss"),
        needs=("pytorch_msssim",),
    ),
    # Verified: Expected all tensors to be on the same device, but got weight is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1__convolution)
    Case(
        id="msssim-mixed-criterion-gaussian-kernel-plain-attribute",
        url="https://github.com/photosynthesis-team/piq/issues/362",
        classes=(0,),
        setup="""
        from pytorch_msssim import MS_SSIM
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU

        class MixLoss(nn.Module):
            \"\"\"alpha * (1 - MS-SSIM) + (1 - alpha) * Gaussian-weighted L1 (Zhao et al.).\"\"\"

            def __init__(self, alpha=0.84, channels=3, size=11, sigma=1.5):
                super().__init__()
                self.alpha, self.channels = alpha, channels
                self.ms_ssim = MS_SSIM(data_range=1.0, channel=channels, win_size=3)
                x = torch.arange(size, dtype=torch.float32) - size // 2
                g = torch.exp(-x ** 2 / (2 * sigma ** 2))
                g = (g[:, None] * g[None, :]) / g.sum() ** 2
                self.gauss = g.expand(channels, 1, size, size).contiguous()

            def forward(self, x, y):
                l1 = F.conv2d((x - y).abs(), self.gauss, padding=5, groups=self.channels)
                return self.alpha * (1 - self.ms_ssim(x, y)) + (1 - self.alpha) * l1.mean()

        criterion = MixLoss().to(device)
        restored = torch.rand(2, 3, 64, 64, device=device)
        clean = torch.rand(2, 3, 64, 64, device=device)
        """,
        cell="""
        loss = criterion(restored, clean)
        psnr = -10 * torch.log10(F.mse_loss(restored, clean))
        """,
        culprit="criterion.gauss",
        target="openreg:0",
        checks=("loss", "psnr"),
        fake=False,
        standin=True,
        needs=("pytorch_msssim",),
    ),
    # -- julius ---------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="julius-band-filters-in-a-plain-list",
        url="https://github.com/pytorch/audio/issues/3921",
        classes=(0,),
        setup="""
        import julius
        device = 'cuda'

        class MultiBandEncoder(nn.Module):
            def __init__(self, cutoffs=(0.05, 0.15, 0.3)):
                super().__init__()
                self.lowpasses = [julius.LowPassFilter(c) for c in cutoffs]
                self.proj = nn.Conv1d(len(cutoffs), 16, 5, padding=2)

            def forward(self, wav):
                bands = torch.cat([lp(wav) for lp in self.lowpasses], dim=1)
                return self.proj(bands)

        encoder = MultiBandEncoder().to(device)
        wav = torch.randn(2, 1, 800, device=device)
        """,
        cell="""
        feats = encoder(wav)
        pooled = feats.mean(dim=-1)
        """,
        culprit="encoder.lowpasses[0]",
        checks=("feats", "pooled"),
        needs=("julius",),
    ),
    # Verified: Expected all tensors to be on the same device, but got weight is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1___slow_conv2d_forward)
    Case(
        id="julius-resampler-moved-to-the-gpu-used-in-a-dataset",
        url="https://github.com/pytorch/pytorch/issues/13775",
        xfail="issue 27 mechanism 7: a transform moved to the device and called in a Dataset's __getitem__ is taken as placed there; the clip it is given is named and moved, where the author brings the resampler back to the CPU, where loading runs",
        classes=(0,),
        setup="""
        import julius
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
        resample = julius.ResampleFrac(22050, 16000).to(device)

        class Clips(torch.utils.data.Dataset):
            def __init__(self, n=6):
                self.clips = [torch.randn(1, 2205) for _ in range(n)]

            def __len__(self):
                return len(self.clips)

            def __getitem__(self, i):
                return resample(self.clips[i])

        loader = DataLoader(Clips(), batch_size=3)
        model = nn.Sequential(nn.Conv1d(1, 8, 5), nn.ReLU(), nn.AdaptiveAvgPool1d(1),
                              nn.Flatten(), nn.Linear(8, 2)).to(device)
        """,
        cell="""
        for wav16 in loader:
            logits = model(wav16.to(device))
        """,
        culprit="resample",
        target="cpu",
        checks=("wav16",),
        fake=False,
        standin=True,
        needs=("julius",),
    ),
    # -- roma -----------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="roma-slerp-steps-from-linspace",
        url="https://github.com/kornia/kornia/pull/1931",
        classes=(0,),
        setup="""
        import roma
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
        q_start = roma.random_unitquat(4, device=device)      # camera orientations at key frames
        q_end = roma.random_unitquat(4, device=device)
        cam_pos = torch.randn(4, 3, device=device)
        """,
        cell="""
        steps = torch.linspace(0, 1, 10)
        q_path = roma.unitquat_slerp(q_start, q_end, steps)
        R_path = roma.unitquat_to_rotmat(q_path)
        look = R_path[..., 2] + cam_pos
        """,
        culprit="steps",
        checks=("q_path", "look"),
        target="openreg:0",
        fake=False,
        standin=True,
        needs=("roma",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cpu and cuda:0!
    Case(
        id="roma-registration-weights-from-numpy",
        url="https://github.com/mikedh/trimesh/pull/2313",
        classes=(0,),
        setup="""
        import numpy as np
        import roma
        device = 'cuda'
        src = torch.randn(2, 50, 3, device=device)          # matched keypoints, two frames
        R_true = roma.random_rotmat(2, device=device)
        dst = src @ R_true.transpose(-1, -2) + 0.01 * torch.randn(2, 50, 3, device=device)
        conf = torch.from_numpy(np.random.default_rng(0).uniform(0.2, 1.0, (2, 50))).float()
        """,
        cell="""
        R, t = roma.rigid_points_registration(src, dst, weights=conf)
        aligned = src @ R.transpose(-1, -2) + t[:, None]
        residual = (aligned - dst).norm(dim=-1).mean()
        """,
        culprit="conf",
        checks=("R", "residual"),
        needs=("roma",),
    ),
    # -- ncps -----------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="ncps-cfc-initial-state-as-in-the-docs",
        url="https://github.com/allenai/allennlp/issues/431",
        classes=(0,),
        setup="""
        from ncps.torch import CfC
        device = 'cuda'
        rnn = CfC(20, 50, batch_first=True).to(device)
        head = nn.Linear(50, 1).to(device)
        x = torch.randn(2, 3, 20).to(device)   # (batch, time, features)
        h0 = torch.zeros(2, 50)                # (batch, units)
        """,
        cell="""
        output, hn = rnn(x, h0)
        y_hat = head(output[:, -1])
        """,
        culprit="h0",
        checks=("output", "y_hat"),
        needs=("ncps",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cpu and cuda:0!
    Case(
        id="ncps-wired-cfc-state-carried-on-the-cpu",
        url="https://github.com/benedekrozemberczki/pytorch_geometric_temporal/issues/20",
        classes=(0,),
        setup="""
        from ncps.torch import CfC
        from ncps.wirings import AutoNCP
        device = 'cuda'
        rnn = CfC(4, AutoNCP(12, 2), batch_first=True, mixed_memory=True).to(device)
        head = nn.Linear(2, 1).to(device)
        stream = torch.randn(2, 30, 4)                 # sensor readings arriving in chunks
        _, state = rnn(stream[:, :10].to(device))
        state = tuple(s.detach().cpu() for s in state)  # kept off the GPU between requests
        """,
        cell="""
        out, state = rnn(stream[:, 10:20].to(device), state)
        y_hat = head(out[:, -1])
        """,
        culprit="state",
        checks=("out", "y_hat"),
        needs=("ncps",),
    ),
    # -- kmeans-pytorch -------------------------------------------------------------------
    # Verified: X1 and X2 must have the same device type. X1: openreg X2: cpu
    Case(
        id="kmeans-pytorch-centers-handed-back-on-the-cpu",
        url="https://github.com/BGU-CS-VIL/DeepDPM/issues/14",
        classes=(0,),
        setup=OPENREG
        + """
        from kmeans_pytorch import kmeans
        encoder = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
        x = torch.randn(40, 10).to(device)
        """,
        cell="""
        feats = encoder(x)
        cluster_ids, cluster_centers = kmeans(X=feats, num_clusters=3, distance='euclidean',
                                              device=torch.device(device))
        soft_assign = torch.softmax(-torch.cdist(feats, cluster_centers), dim=1)
        """,
        culprit="cluster_centers",
        target="openreg:0",
        checks=("soft_assign",),
        fake=False,
        standin=True,
        needs=("kmeans_pytorch",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="kmeans-pytorch-pairwise-distance-default-device",
        url="https://github.com/subhadarship/kmeans_pytorch/issues/10",
        classes=(0,),
        setup=OPENREG
        + """
        from kmeans_pytorch import pairwise_distance
        encoder = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 4)).to(device)
        prototypes = nn.Parameter(torch.randn(5, 4, device=device))
        x = torch.randn(12, 10).to(device)
        weights = torch.rand(12).to(device)              # per-sample confidence
        """,
        cell="""
        feats = encoder(x)
        dist = pairwise_distance(feats, prototypes)
        proto_loss = (dist.min(dim=1).values * weights).mean()
        """,
        culprit="dist",
        target="openreg:0",
        checks=("proto_loss",),
        fake=False,
        standin=True,
        needs=("kmeans_pytorch",),
    ),
    # -- torch-pca ------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got mat2 is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_out_mm)
    Case(
        id="torch-pca-fitted-on-cpu-features",
        url="https://github.com/valentingol/torch_pca/pull/12",
        classes=(0,),
        setup=OPENREG
        + """
        from torch_pca import PCA
        bank = torch.randn(200, 16)                      # features saved from an earlier run
        pca = PCA(n_components=4).fit(bank)
        encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU()).to(device)
        x = torch.randn(10, 8).to(device)
        """,
        cell="""
        z = encoder(x)
        z_low = pca.transform(z)
        recon = pca.inverse_transform(z_low)
        """,
        culprit="pca",
        target="openreg:0",
        checks=("z_low", "recon"),
        fake=False,
        standin=True,
        needs=("torch_pca",),
    ),
    # Verified: Expected all tensors to be on the same device, but got mat2 is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_out_mm)
    Case(
        id="torch-pca-queries-from-numpy",
        url="https://github.com/MaartenGr/KeyBERT/pull/181",
        classes=(0,),
        setup=OPENREG
        + """
        import numpy as np
        from torch_pca import PCA
        gallery = torch.randn(100, 16)
        pca = PCA(n_components=4).fit(gallery)
        pca.to(device)                                   # torch-pca's own move, in place
        gallery_low = pca.transform(gallery.to(device))
        queries = torch.from_numpy(np.random.default_rng(0).normal(size=(3, 16)).astype('float32'))
        """,
        cell="""
        q_low = pca.transform(queries)
        scores = q_low @ gallery_low.T
        top3 = scores.topk(3, dim=1).indices
        """,
        culprit="queries",
        target="openreg:0",
        checks=("q_low", "scores"),
        fake=False,
        standin=True,
        needs=("torch_pca",),
    ),
    # -- product-key-memory ---------------------------------------------------------------
    # Verified: indices should be either on cpu or on the same device as the indexed tensor
    # (cpu)
    Case(
        id="pkm-trainable-memory-mask-built-without-a-device",
        url="https://github.com/aassxun/SEMICON/issues/2",
        classes=(0,),
        setup="""
        from product_key_memory import PKM
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
        pkm = PKM(dim=32, heads=2, num_keys=16, topk=4, dim_head=16,
                  concat_values_and_combine=True).to(device)
        trainable = torch.zeros(pkm.num_memories, dtype=torch.bool)
        trainable[:64] = True                    # only the first memories are fine-tuned
        x = torch.randn(2, 8, 32, device=device)
        """,
        cell="""
        out = pkm(x, mem_trainable_mask=trainable)
        y = x + out
        """,
        culprit="trainable",
        checks=("out", "y"),
        target="openreg:0",
        fake=False,
        standin=True,
        needs=("product_key_memory",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="pkm-layer-swapped-in-after-the-move",
        url="https://github.com/deepset-ai/FARM/pull/200",
        classes=(0,),
        setup="""
        from product_key_memory import PKM
        device = 'cuda'

        class Block(nn.Module):
            def __init__(self, d=32):
                super().__init__()
                self.norm = nn.LayerNorm(d)
                self.ff = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))

            def forward(self, x):
                return x + self.ff(self.norm(x))

        model = nn.Sequential(nn.Embedding(100, 32), Block(), Block(), nn.Linear(32, 100))
        model.to(device)
        # swap the second feed-forward for a product-key memory, as the paper does
        model[2].ff = PKM(dim=32, heads=2, num_keys=16, topk=4, dim_head=16)
        tokens = torch.randint(0, 100, (2, 8), device=device)
        """,
        cell="""
        logits = model(tokens)
        loss = F.cross_entropy(logits.flatten(0, 1), tokens.flatten())
        """,
        culprit="model[2].ff",
        checks=("logits", "loss"),
        needs=("product_key_memory",),
    ),
]
