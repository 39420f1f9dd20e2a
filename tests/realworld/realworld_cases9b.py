"""The ninth corpus, seventh blind batch (issue 27), continued: plain PyTorch shapes the corpus
lacked and the batch's quiet cases. See ``realworld_cases9.py``.

Shapes: MAML fast weights cloned before the model moved and run with
``torch.func.functional_call``, a forward pre-hook that makes its noise on the CPU, a custom
``autograd.Function`` whose coefficient meets the gradient only in ``backward`` (a training
step), complex rotary frequencies (``freqs_cis``) kept as a plain attribute, a ``grid_sample``
grid built from ``meshgrid``, ``load_state_dict(assign=True)`` after the move, an
``AveragedModel`` (SWA) made before the move, noise drawn on the device with a CPU
``torch.Generator``, a KV-cache dataclass allocated without a device, cache positions from
``arange`` for ``index_copy_``, a hand-rolled EMA updated with ``torch._foreach_lerp_``, a
``torch.func.vmap`` ensemble with a member appended after the others moved, a confusion matrix
accumulated on the CPU in an evaluation loop and per-request temperatures in a sampling loop.
Quiet cases: images too small for MS-SSIM's scales, a quaternion passed where roma wants a
rotation vector, more k-means clusters than points, integer PCM fed to a julius resampler and
unbatched audio fed to an auraloss STFT loss.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

CASES: list[Case] = [
    # -- plain PyTorch --------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="maml-fast-weights-cloned-before-the-move",
        url="https://github.com/dragen1860/MAML-Pytorch/pull/13",
        classes=(0,),
        setup="""
        from torch.func import functional_call
        device = 'cuda'
        learner = nn.Sequential(nn.Linear(5, 32), nn.ReLU(), nn.Linear(32, 3))
        # the task-adapted copy, taken once the meta-learner is built
        fast_weights = {name: p.detach().clone() for name, p in learner.named_parameters()}
        learner.to(device)
        x_query = torch.randn(6, 5, device=device)
        y_query = torch.randint(0, 3, (6,), device=device)
        """,
        cell="""
        logits_q = functional_call(learner, fast_weights, (x_query,))
        loss_q = F.cross_entropy(logits_q, y_query)
        acc_q = (logits_q.argmax(1) == y_query).float().mean()
        """,
        culprit="fast_weights",
        checks=("logits_q", "loss_q"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="forward-pre-hook-noise-made-on-the-cpu",
        url="https://github.com/pytorch/pytorch/issues/9417",
        classes=(0,),
        setup="""
        device = 'cuda'
        net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(),
                            nn.Linear(32, 2)).to(device)

        def add_noise(module, inputs, sigma=0.1):
            (x,) = inputs
            noise = sigma * torch.randn(x.shape)        # Gaussian noise injection (training only)
            return (x + noise,)

        handle = net[2].register_forward_pre_hook(add_noise)
        xb = torch.randn(8, 10, device=device)
        yb = torch.randint(0, 2, (8,), device=device)
        """,
        cell="""
        logits = net(xb)
        loss = F.cross_entropy(logits, yb)
        """,
        culprit="noise in add_noise",
        checks=("logits", "loss"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="gradient-reversal-function-coefficient-on-the-cpu",
        url="https://github.com/cvxpy/cvxpylayers/issues/1",
        classes=(0,),
        setup=OPENREG
        + """
        class GradReverse(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, coeff):
                ctx.save_for_backward(coeff)
                return x.view_as(x)

            @staticmethod
            def backward(ctx, grad_out):
                (coeff,) = ctx.saved_tensors
                return -coeff * grad_out, None

        features = nn.Sequential(nn.Linear(12, 16), nn.ReLU()).to(device)
        label_head = nn.Linear(16, 3).to(device)
        domain_head = nn.Linear(16, 2).to(device)
        params = [*features.parameters(), *label_head.parameters(), *domain_head.parameters()]
        opt = torch.optim.SGD(params, lr=0.01)
        coeff = torch.tensor([0.3])          # the DANN schedule's lambda for this epoch
        xs = torch.randn(8, 12).to(device)
        ys = torch.randint(0, 3, (8,)).to(device)
        domains = torch.randint(0, 2, (8,)).to(device)
        """,
        cell="""
        h = features(xs)
        loss = F.cross_entropy(label_head(h), ys) + F.cross_entropy(
            domain_head(GradReverse.apply(h, coeff)), domains)
        opt.zero_grad()
        loss.backward()
        opt.step()
        """,
        culprit="coeff",
        target="openreg:0",
        checks=("loss", "features[0].weight.grad"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="rotary-freqs-cis-complex-plain-attribute",
        url="https://github.com/logtd/ComfyUI-HunyuanLoom/pull/17",
        classes=(0,),
        setup="""
        device = 'cuda'

        def precompute_freqs_cis(dim, end, theta=10000.0):
            freqs = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
            t = torch.arange(end).float()
            return torch.polar(torch.ones(end, dim // 2), torch.outer(t, freqs))

        class TinyLlamaAttention(nn.Module):
            def __init__(self, dim=32, n_heads=2, max_len=16):
                super().__init__()
                self.n_heads, self.head_dim = n_heads, dim // n_heads
                self.wq, self.wk = nn.Linear(dim, dim), nn.Linear(dim, dim)
                self.freqs_cis = precompute_freqs_cis(self.head_dim, max_len)

            def rotate(self, x):
                xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
                fc = self.freqs_cis[: x.shape[1]].view(1, x.shape[1], 1, -1)
                return torch.view_as_real(xc * fc).flatten(3)

            def forward(self, x):
                b, n, _ = x.shape
                q = self.wq(x).view(b, n, self.n_heads, self.head_dim)
                k = self.wk(x).view(b, n, self.n_heads, self.head_dim)
                q, k = self.rotate(q), self.rotate(k)
                return torch.einsum('bqhd,bkhd->bhqk', q, k) / self.head_dim ** 0.5

        attn = TinyLlamaAttention().to(device)
        x = torch.randn(2, 10, 32, device=device)
        """,
        cell="""
        scores = attn(x)
        probs = scores.softmax(-1)
        """,
        culprit="attn.freqs_cis",
        checks=("scores", "probs"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cpu and cuda:0!
    Case(
        id="grid-sample-grid-from-meshgrid",
        url="https://github.com/PTB-MR/mrpro/issues/823",
        classes=(0,),
        setup="""
        device = 'cuda'
        flow_net = nn.Conv2d(6, 2, 3, padding=1).to(device)
        moving = torch.rand(2, 3, 16, 16, device=device)
        fixed = torch.rand(2, 3, 16, 16, device=device)
        ys, xs = torch.meshgrid(torch.linspace(-1, 1, 16), torch.linspace(-1, 1, 16),
                                indexing='ij')
        identity_grid = torch.stack([xs, ys], dim=-1)[None]      # (1, H, W, 2)
        """,
        cell="""
        flow = flow_net(torch.cat([moving, fixed], 1)).permute(0, 2, 3, 1)
        warped = F.grid_sample(moving, identity_grid + 0.1 * flow, align_corners=True)
        sim_loss = F.mse_loss(warped, fixed)
        """,
        culprit="identity_grid",
        checks=("warped", "sim_loss"),
    ),
    # Verified: Expected all tensors to be on the same device, but got mat1 is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_out_addmm)
    Case(
        id="load-state-dict-assign-after-the-move",
        url="https://github.com/lincc-frameworks/hyrax/pull/893",
        classes=(0,),
        setup=OPENREG
        + """
        import io
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 2))
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)       # last night's checkpoint
        model.to(device)
        buffer.seek(0)
        model.load_state_dict(torch.load(buffer), assign=True)
        x = torch.randn(4, 6).to(device)
        """,
        cell="""
        logits = model(x)
        preds = logits.argmax(1)
        """,
        culprit="model",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but got mat1 is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_out_addmm)
    Case(
        id="swa-averaged-model-made-before-the-move",
        url="https://github.com/hoya012/swa-tutorials-pytorch/issues/2",
        classes=(0,),
        setup=OPENREG
        + """
        from torch.optim.swa_utils import AveragedModel, SWALR
        model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 2))
        swa_model = AveragedModel(model)
        model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        swa_sched = SWALR(opt, swa_lr=0.01)
        loader = DataLoader(TensorDataset(torch.randn(16, 6), torch.randint(0, 2, (16,))),
                            batch_size=8)
        x_val = torch.randn(5, 6).to(device)
        """,
        cell="""
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        swa_model.update_parameters(model)
        swa_sched.step()
        val_logits = swa_model(x_val)
        """,
        culprit="swa_model",
        target="openreg:0",
        checks=("val_logits",),
        fake=False,
        standin=True,
    ),
    # Verified: Expected a 'openreg' device type for generator but found 'cpu'
    Case(
        id="noise-drawn-on-the-device-with-a-cpu-generator",
        url="https://github.com/mlverse/torch/issues/480",
        xfail="issue 27 mechanism 7: culprit and target are right; the first fix makes the generator again on the device, which the `openreg` stand-in cannot (it has no generators of its own), so the fix cannot run here",
        classes=(0,),
        setup=OPENREG
        + """
        g = torch.Generator().manual_seed(1234)        # reproducible samples
        denoise = nn.Sequential(nn.Linear(8, 32), nn.SiLU(), nn.Linear(32, 8)).to(device)
        betas = torch.linspace(1e-4, 0.02, 10).to(device)
        """,
        cell="""
        x = torch.randn(4, 8, generator=g, device=device)
        for beta in betas.flip(0):
            x = (x - beta * denoise(x)) / (1 - beta).sqrt()
        samples = x
        """,
        culprit="g",
        target="openreg:0",
        checks=("samples",),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="kv-cache-dataclass-allocated-without-a-device",
        url="https://github.com/openai/gpt-oss/issues/271",
        xfail="issue 27 mechanism 3: the first fix moves both fields and runs, but the field the failing line read (`cache.k`) is named where the author names the dataclass; the first corpus names a dict cache's field (`cache['k']`) in the same shape",
        classes=(0,),
        setup="""
        from dataclasses import dataclass
        device = 'cuda'

        @dataclass
        class KVCache:
            k: torch.Tensor
            v: torch.Tensor

            @classmethod
            def empty(cls, batch, max_len, dim, device=None):
                return cls(torch.zeros(batch, max_len, dim, device=device),
                           torch.zeros(batch, max_len, dim, device=device))

        wq, wk, wv = (nn.Linear(16, 16).to(device) for _ in range(3))
        cache = KVCache.empty(2, 12, 16)
        prompt = torch.randn(2, 5, 16, device=device)
        """,
        cell="""
        cache.k[:, :5] = wk(prompt)
        cache.v[:, :5] = wv(prompt)
        q = wq(prompt[:, -1:])
        att = (q @ cache.k[:, :5].transpose(1, 2) / 4.0).softmax(-1)
        ctx = att @ cache.v[:, :5]
        """,
        culprit="cache",
        checks=("att", "ctx"),
    ),
    # Verified: index_copy_(): self, index and source expected to be in the same device, but
    # got (self) openreg:0, (index) cpu, and (source) openreg:0
    Case(
        id="kv-cache-index-copy-positions-from-arange",
        url="https://github.com/pytorch/executorch/pull/19174",
        classes=(0,),
        setup=OPENREG
        + """
        k_cache = torch.zeros(1, 16, 8).to(device)
        v_cache = torch.zeros(1, 16, 8).to(device)
        proj = nn.Linear(8, 16).to(device)
        tokens = torch.randn(1, 3, 8).to(device)
        start_pos = 4
        """,
        cell="""
        k_val, v_val = proj(tokens).chunk(2, dim=-1)
        positions = torch.arange(tokens.shape[1]) + start_pos
        k_cache.index_copy_(1, positions, k_val)
        v_cache.index_copy_(1, positions, v_val)
        att = (k_val @ k_cache.transpose(1, 2)).softmax(-1)
        out = att @ v_cache
        """,
        culprit="positions",
        target="openreg:0",
        checks=("k_cache", "out"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="hand-rolled-ema-foreach-lerp-shadow-on-the-cpu",
        url="https://github.com/huggingface/diffusers/pull/7685",
        classes=(0,),
        setup="""
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
        model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))
        ema_params = [p.detach().clone() for p in model.parameters()]   # the shadow weights
        model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        xb, yb = torch.randn(16, 8, device=device), torch.randn(16, 1, device=device)
        """,
        cell="""
        loss = F.mse_loss(model(xb), yb)
        with torch.no_grad():
            torch._foreach_lerp_(ema_params, list(model.parameters()), 0.01)
        ema_norm = torch.stack([p.norm() for p in ema_params]).sum()
        """,
        culprit="ema_params",
        target="openreg:0",
        checks=("loss", "ema_norm", "ema_params[0]"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but got tensors is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_out_cat)
    Case(
        id="vmap-ensemble-member-appended-after-the-move",
        url="https://github.com/Project-MONAI/MONAI/issues/6365",
        classes=(0,),
        setup="""
        import copy
        from torch.func import functional_call, stack_module_state, vmap
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU

        def make_mlp():
            return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 1))

        models = [make_mlp().to(device) for _ in range(4)]
        models.append(make_mlp())                 # one more member for the ensemble
        x = torch.randn(10, 6, device=device)
        """,
        cell="""
        params, buffers = stack_module_state(models)
        base = copy.deepcopy(models[0]).to('meta')

        def member(p, b, x):
            return functional_call(base, (p, b), (x,))

        preds = vmap(member, in_dims=(0, 0, None))(params, buffers, x)
        mean, spread = preds.mean(0), preds.std(0)
        """,
        culprit="models[4]",
        target="openreg:0",
        checks=("preds", "mean"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="confusion-matrix-counts-kept-on-the-cpu",
        url="https://github.com/Lightning-AI/torchmetrics/issues/1865",
        classes=(0,),
        setup=OPENREG
        + """
        n_classes = 3
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, n_classes)).to(device)
        val_loader = DataLoader(TensorDataset(torch.randn(12, 6), torch.randint(0, 3, (12,))),
                                batch_size=4)
        confusion = torch.zeros(n_classes, n_classes, dtype=torch.long)
        """,
        cell="""
        for xb, yb in val_loader:
            xb, yb = xb.to(device), yb.to(device)
            pred = model(xb).argmax(1)
            confusion += torch.bincount(yb * n_classes + pred,
                                        minlength=n_classes ** 2).view(n_classes, n_classes)
        per_class_recall = confusion.diag() / confusion.sum(1).clamp(min=1)
        """,
        culprit="confusion",
        target="openreg:0",
        checks=("confusion", "per_class_recall"),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="sampling-loop-per-sequence-temperatures",
        url="https://github.com/pytorch-tpu/llama/pull/22",
        classes=(0,),
        setup=OPENREG
        + """
        vocab = 50
        lm = nn.Sequential(nn.Embedding(vocab, 32), nn.Linear(32, vocab)).to(device)
        prompts = torch.randint(0, vocab, (2, 4)).to(device)
        temperatures = torch.tensor([0.7, 1.3])          # one per request
        """,
        cell="""
        seq = prompts
        for _ in range(5):
            logits = lm(seq)[:, -1]
            probs = torch.softmax(logits / temperatures[:, None], dim=-1)
            nxt = torch.multinomial(probs, 1)
            seq = torch.cat([seq, nxt], dim=1)
        """,
        culprit="temperatures",
        target="openreg:0",
        checks=("seq", "probs"),
        fake=False,
        standin=True,
    ),
    # -- other errors: the panel stays quiet ----------------------------------------------
    # Verified: AssertionError: Image size should be larger than 160 due to the 4
    # downsamplings in ms-ssim
    Case(
        id="quiet-msssim-images-too-small-for-the-scales",
        url="https://github.com/VainF/pytorch-msssim/issues/28",
        classes=(0,),
        setup="""
        from pytorch_msssim import ms_ssim
        device = 'cuda'
        restored = torch.rand(2, 3, 64, 64, device=device)     # 64x64 crops
        clean = torch.rand(2, 3, 64, 64, device=device)
        """,
        cell="loss = 1 - ms_ssim(restored, clean, data_range=1.0)\n",
        quiet=True,
        needs=("pytorch_msssim",),
    ),
    # Verified: AssertionError: Input should be a Bx3 tensor.
    Case(
        id="quiet-roma-quaternion-passed-as-a-rotation-vector",
        url="https://github.com/naver/roma/issues/3",
        classes=(0,),
        setup="""
        import roma
        device = 'cuda'
        poses = roma.random_unitquat(5, device=device)          # (x, y, z, w) quaternions
        points = torch.randn(5, 3, device=device)
        """,
        cell="""
        R = roma.rotvec_to_rotmat(poses)
        moved = (R @ points[..., None]).squeeze(-1)
        """,
        quiet=True,
        needs=("roma",),
    ),
    # Verified: ValueError: Cannot take a larger sample than population when 'replace=False'
    Case(
        id="quiet-kmeans-pytorch-more-clusters-than-points",
        url="https://github.com/jaehyun513/STUNT/issues/2",
        classes=(0,),
        setup=OPENREG
        + """
        from kmeans_pytorch import kmeans
        feats = torch.randn(6, 4).to(device)                  # six images in this batch
        """,
        cell="""
        ids, centers = kmeans(X=feats, num_clusters=8, device=torch.device(device))
        """,
        quiet=True,
        fake=False,
        standin=True,
        needs=("kmeans_pytorch",),
    ),
    # Verified: expected scalar type Short but found Float
    Case(
        id="quiet-julius-resample-integer-pcm",
        url="https://github.com/pytorch/audio/issues/2294",
        classes=(0,),
        setup=OPENREG
        + """
        import julius
        resample = julius.ResampleFrac(44100, 16000).to(device)
        pcm = torch.randint(-32768, 32767, (1, 1, 4410), dtype=torch.int16).to(device)
        """,
        cell="wav16 = resample(pcm)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("julius",),
    ),
    # Verified: ValueError: not enough values to unpack (expected 3, got 1)
    Case(
        id="quiet-auraloss-stft-loss-on-unbatched-audio",
        url="https://github.com/modelscope/FunASR/issues/1632",
        classes=(0,),
        setup="""
        import auraloss
        device = 'cuda'
        stft_loss = auraloss.freq.STFTLoss(fft_size=256, hop_size=64, win_length=256)
        estimate = torch.randn(2048, device=device)            # one mono clip, no batch axis
        reference = torch.randn(2048, device=device)
        """,
        cell="loss = stft_loss(estimate, reference)\n",
        quiet=True,
        needs=("auraloss",),
    ),
]
