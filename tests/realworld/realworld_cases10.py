"""The tenth corpus, eighth blind batch (issue 27): libraries the earlier corpora do not use,
expectations written before ipydevice ran on them, by an author who had not read the engine,
the changelog or the architecture notes.

Libraries new to the corpus: torch-lr-finder (``LRFinder`` whose ``reset`` puts the model back
where it found it, a weighted criterion the finder never moves), ptwt (``cwt`` with its scales
kept as a buffer of the loss module, per-level ``wavedec2`` thresholds in a plain list),
torchinterp1d (``interp1d`` with a global time grid read inside a model's ``forward``, a
calibration curve from numpy kept in a dict), geotorch (an orthogonal weight set from a CPU QR
factor, a frozen teacher deep-copied before the student moved), conformer (``ConformerBlock``
masks built from CPU lengths, log-mel statistics as class attributes of the encoder),
torch-kmeans (``KMeans`` fitted on a CPU reference set, then asked to ``predict`` device
embeddings: the CPU is the target), torch-dct (``LinearDCT`` kept in a plain dict of
featurizers, a JPEG quantisation table read as a global by a helper function) and torchjd (a
``Constant`` aggregator whose weights stay on the CPU, ``mtl_backward`` with an auxiliary target
left on the CPU in a batch dict); in ``realworld_cases10b.py`` plain PyTorch and the quiet cases.

Shapes: a library that moves the model for its own loop and back again, containers handed to a
library that never moves them (a criterion, an aggregator, a dict of featurizers), buffers that
must stay on the CPU (the target is then the CPU), values from numpy, entries of a batch dict,
globals read inside methods and helpers, the setter of a parametrized weight, a deep copy taken
before the move, class attributes, state a fitted object keeps.

``classes`` is ``(0,)`` throughout: the author did not assign issue 27's mechanism numbers.
Cases on ``openreg`` (``standin=True``) are those whose library or fix reads tensor values
(``.numpy()``, k-means loops, the finder's loop, geotorch's initialisation), train (fake CUDA
runs without gradients) or meet operators fake CUDA does not check; ``openreg:0`` stands for the
report's GPU.
Each case's comment quotes the error the cell raised, as checked before ipydevice ever ran on
it.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

#: A small classifier and its loader for the learning-rate finder cases.
FINDER = """
        from torch_lr_finder import LRFinder
        model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 3))
        train_loader = DataLoader(TensorDataset(torch.randn(64, 10), torch.randint(0, 3, (64,))),
                                  batch_size=16)
"""

CASES: list[Case] = [
    # -- torch-lr-finder ------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got mat1 is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_out_addmm)
    Case(
        id="lr-finder-reset-puts-the-model-back-on-the-cpu",
        url="https://github.com/davidtvs/pytorch-lr-finder/issues/11",
        xfail="issue 27 mechanism 3: the model is named through the helper that holds it (`lr_finder.model`) where the author writes the user's own name for it (`model`); the fix runs",
        classes=(0,),
        setup=(
            OPENREG
            + FINDER
            + """
        criterion = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9)
        lr_finder = LRFinder(model, optimizer, criterion, device=device)
        """,
            """
        lr_finder.range_test(train_loader, end_lr=1.0, num_iter=6)
        lr_finder.reset()              # model and optimizer back to their initial state
        for g in optimizer.param_groups:
            g['lr'] = 3e-2
        """,
        ),
        cell="""
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            optimizer.zero_grad()
            loss = criterion(model(xb), yb)
            loss.backward()
            optimizer.step()
        """,
        culprit="model",
        target="openreg:0",
        checks=("loss", "model[0].weight"),
        fake=False,
        standin=True,
        needs=("torch_lr_finder",),
    ),
    # Verified: Expected all tensors to be on the same device, but got weight is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_output_nll_loss_forward)
    Case(
        id="lr-finder-weighted-criterion-never-moved",
        url="https://github.com/fastai/fastai/issues/1715",
        xfail="issue 27 mechanism 6: the loss's weight is named (`criterion.weight`, as the first corpus names it) where the author names the loss; the fix `criterion.to(device)` cannot make the re-run work, since the failed range test left its optimizer with a scheduler attached",
        classes=(0,),
        setup=OPENREG
        + FINDER
        + """
        counts = torch.bincount(train_loader.dataset.tensors[1], minlength=3).float()
        class_weights = counts.sum() / (3 * counts)          # inverse-frequency weights
        criterion = nn.CrossEntropyLoss(weight=class_weights)
        model.to(device)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-6)
        lr_finder = LRFinder(model, optimizer, criterion, device=device)
        """,
        cell="""
        lr_finder.range_test(train_loader, end_lr=1.0, num_iter=5)
        losses = torch.tensor(lr_finder.history['loss'])
        best_lr = lr_finder.history['lr'][int(losses.argmin())]
        lr_finder.reset()
        probe = model(train_loader.dataset.tensors[0][:4].to(device))
        """,
        culprit="criterion",
        target="openreg:0",
        checks=("probe", "model[0].weight"),
        fake=False,
        standin=True,
        needs=("torch_lr_finder",),
    ),
    # -- ptwt -----------------------------------------------------------------------------
    # Verified: TypeError: can't convert openreg:0 device type tensor to numpy. Use
    # Tensor.cpu() to copy the tensor to host memory first.
    Case(
        id="ptwt-cwt-scales-buffer-moved-with-the-loss",
        url="https://github.com/v0lta/PyTorch-Wavelet-Toolbox/issues/39",
        classes=(0,),
        setup=OPENREG
        + """
        import ptwt

        class ScalogramLoss(nn.Module):
            \"\"\"L1 between the magnitudes of two continuous wavelet transforms.\"\"\"

            def __init__(self, octaves=3, divs=4):
                super().__init__()
                self.register_buffer('scales', 2 ** (torch.arange(octaves * divs) / divs + 1))

            def forward(self, x, x_hat):
                s, _ = ptwt.cwt(x, self.scales, 'mexh')
                s_hat, _ = ptwt.cwt(x_hat, self.scales, 'mexh')
                return F.l1_loss(s_hat.abs(), s.abs())

        criterion = ScalogramLoss().to(device)
        decoder = nn.Sequential(nn.Linear(16, 256), nn.Tanh()).to(device)
        z = torch.randn(2, 16, device=device)
        target = torch.randn(2, 256, device=device)
        """,
        cell="""
        recon = decoder(z)
        loss = criterion(target, recon) + F.mse_loss(recon, target)
        """,
        culprit="criterion.scales",
        target="cpu",
        checks=("criterion.scales",),
        fake=False,
        standin=True,
        needs=("ptwt",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="ptwt-wavedec2-per-level-thresholds-in-a-list",
        url="https://github.com/v0lta/PyTorch-Wavelet-Toolbox/pull/19",
        xfail="issue 27 mechanism 2: a loop variable over a comprehension's zip is named (`thr`) where the author names the list it comes from (`thresholds`); the fix runs",
        classes=(0,),
        setup="""
        import ptwt
        device = 'cuda'
        denoiser = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(16, 3, 3, padding=1)).to(device)
        # one soft threshold per colour channel for each detail level (finest first)
        thresholds = [torch.tensor([0.10, 0.12, 0.15]).view(3, 1, 1),
                      torch.tensor([0.05, 0.06, 0.08]).view(3, 1, 1)]
        images = torch.rand(2, 3, 32, 32).to(device)
        """,
        cell="""
        restored = denoiser(images)
        coeffs = ptwt.wavedec2(restored, 'haar', level=2)
        shrunk = [coeffs[0]]
        for level, details in enumerate(coeffs[1:]):
            thr = thresholds[::-1][level]
            shrunk.append(tuple(d.sign() * (d.abs() - thr).clamp(min=0) for d in details))
        clean = ptwt.waverec2(shrunk, 'haar')
        """,
        culprit="thresholds",
        checks=("restored", "clean"),
        needs=("ptwt",),
    ),
    # -- torchinterp1d --------------------------------------------------------------------
    # Verified: AssertionError: All parameters must be on the same device.
    Case(
        id="interp1d-global-time-grid-read-in-forward",
        url="https://github.com/tfjgeorge/nngeometry/pull/105",
        classes=(0,),
        setup=OPENREG
        + """
        from torchinterp1d import interp1d
        t_grid = torch.linspace(0, 1, 50)          # the common grid every series is put on

        class IrregularEncoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(50, 32), nn.ReLU(), nn.Linear(32, 4))

            def forward(self, t_obs, y_obs):
                y_reg = interp1d(t_obs, y_obs, t_grid.expand(len(t_obs), -1))
                return self.net(y_reg)

        encoder = IrregularEncoder().to(device)
        t_obs = torch.sort(torch.rand(3, 30), dim=1).values.to(device)
        y_obs = torch.randn(3, 30).to(device)
        """,
        cell="""
        codes = encoder(t_obs, y_obs)
        loss = codes.pow(2).mean()
        """,
        culprit="t_grid",
        target="openreg:0",
        checks=("codes", "loss"),
        fake=False,
        standin=True,
        needs=("torchinterp1d",),
    ),
    # Verified: AssertionError: All parameters must be on the same device.
    Case(
        id="interp1d-calibration-curve-kept-in-a-dict",
        url="https://github.com/ion-g-ion/torchTT/pull/36",
        xfail="issue 27 mechanism 3: the dict's item the call read is named (`calib['x']`) where the author names the dict; the fix moves the dict and runs",
        classes=(0,),
        setup="""
        import numpy as np
        from torchinterp1d import interp1d
        device = 'cuda'
        # isotonic calibration curve, fitted on the validation set and saved with numpy
        calib = {'x': torch.from_numpy(np.linspace(0, 1, 11)).float(),
                 'y': torch.from_numpy(np.linspace(0, 1, 11) ** 1.5).float()}
        scorer = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
        x = torch.randn(20, 8).to(device)
        """,
        cell="""
        probs = torch.sigmoid(scorer(x)).squeeze(-1)
        calibrated = interp1d(calib['x'], calib['y'], probs)
        flagged = calibrated > 0.5
        """,
        culprit="calib",
        checks=("probs", "calibrated"),
        needs=("torchinterp1d",),
    ),
    # -- geotorch -------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got source is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_source_Tensor_set_)
    Case(
        id="geotorch-orthogonal-weight-set-from-a-cpu-qr-factor",
        url="https://github.com/lezcano/geotorch/issues/39",
        classes=(0,),
        setup=OPENREG
        + """
        import geotorch
        align = nn.Linear(8, 8, bias=False).to(device)
        geotorch.orthogonal(align, 'weight')
        q0, _ = torch.linalg.qr(torch.randn(8, 8))      # a random rotation to start from
        src = torch.randn(32, 8, device=device)
        dst = torch.randn(32, 8, device=device)
        """,
        cell="""
        align.weight = q0
        loss = F.mse_loss(align(src), dst)
        ortho_err = (align.weight @ align.weight.T - torch.eye(8, device=device)).abs().max()
        """,
        culprit="q0",
        target="openreg:0",
        checks=("loss", "align.weight"),
        fake=False,
        standin=True,
        needs=("geotorch",),
    ),
    # Verified: Expected all tensors to be on the same device, but got mat1 is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_out_addmm)
    Case(
        id="geotorch-teacher-copied-before-the-move",
        url="https://github.com/lezcano/geotorch/pull/9",
        classes=(0,),
        setup=OPENREG
        + """
        import copy
        import geotorch

        class OrthoNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.inp = nn.Linear(12, 16)
                self.rot = nn.Linear(16, 16, bias=False)
                self.out = nn.Linear(16, 4)
                geotorch.orthogonal(self.rot, 'weight')

            def forward(self, x):
                return self.out(torch.tanh(self.rot(self.inp(x))))

        student = OrthoNet()
        teacher = copy.deepcopy(student).eval()      # the frozen copy for self-distillation
        student.to(device)
        xb = torch.randn(8, 12, device=device)
        """,
        cell="""
        s_logits = student(xb)
        with torch.no_grad():
            t_logits = teacher(xb)
        distill = F.kl_div(s_logits.log_softmax(-1), t_logits.softmax(-1), reduction='batchmean')
        """,
        culprit="teacher",
        target="openreg:0",
        checks=("s_logits", "t_logits", "distill"),
        fake=False,
        standin=True,
        needs=("geotorch",),
    ),
    # -- conformer ------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="conformer-block-mask-from-cpu-lengths",
        url="https://github.com/jordiclive/Convert-PolyAI-Torch/issues/3",
        classes=(0,),
        setup="""
        from conformer import ConformerBlock
        device = 'cuda'
        blocks = nn.ModuleList([ConformerBlock(dim=32, dim_head=8, heads=4, conv_kernel_size=7)
                                for _ in range(2)]).to(device).eval()
        ctc_head = nn.Linear(32, 20).to(device)
        feats = torch.randn(3, 25, 32).to(device)
        lengths = torch.tensor([25, 18, 11])          # frames per utterance, from the collate
        """,
        cell="""
        mask = torch.arange(feats.shape[1])[None, :] < lengths[:, None]
        h = feats
        for block in blocks:
            h = block(h, mask=mask)
        log_probs = ctc_head(h).log_softmax(-1)
        """,
        culprit="mask",
        checks=("h", "log_probs"),
        needs=("conformer",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="conformer-encoder-class-attribute-scale",
        url="https://github.com/speechbrain/speechbrain/pull/1841",
        classes=(0,),
        setup="""
        from conformer import Conformer
        device = 'cuda'

        class SpeechEncoder(nn.Module):
            # log-mel statistics of the training set, shared by every instance
            mel_mean = torch.zeros(40)
            mel_std = torch.ones(40)

            def __init__(self, dim=32):
                super().__init__()
                self.proj = nn.Linear(40, dim)
                self.conformer = Conformer(dim=dim, depth=2, dim_head=8, heads=4,
                                           conv_kernel_size=7)

            def forward(self, mels):
                x = (mels - self.mel_mean) / self.mel_std
                return self.conformer(self.proj(x))

        encoder = SpeechEncoder().to(device).eval()
        mels = torch.randn(2, 30, 40, device=device)
        """,
        cell="""
        enc = encoder(mels)
        pooled = enc.mean(1)
        """,
        culprit="SpeechEncoder.mel_mean",
        checks=("enc", "pooled"),
        needs=("conformer",),
    ),
    # -- torch-kmeans ---------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="torch-kmeans-fitted-on-cpu-reference-predicts-device-embeddings",
        url="https://github.com/DeMoriarty/fast_pytorch_kmeans/pull/4",
        xfail="issue 27 mechanism 7: the centres torch-kmeans keeps from a CPU fit are read in its own file, which the path check takes for torch's (`/site-packages/torch`): no culprit; the author wants the embeddings on the CPU",
        classes=(0,),
        setup=OPENREG
        + """
        from torch_kmeans import KMeans
        reference = torch.randn(1, 60, 8)            # embeddings of the labelled reference set
        km = KMeans(n_clusters=4, verbose=False, seed=0)
        km.fit(reference)
        embedder = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).to(device)
        batch = torch.randn(1, 20, 16, device=device)
        """,
        cell="""
        emb = embedder(batch)
        assignments = km.predict(emb)
        counts = torch.bincount(assignments.flatten(), minlength=4)
        """,
        culprit="emb",
        target="cpu",
        checks=("assignments", "counts"),
        fake=False,
        standin=True,
        needs=("torch_kmeans",),
    ),
    # -- torch-dct ------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="torch-dct-linear-dct-in-a-dict-of-featurizers",
        url="https://github.com/zh217/torch-dct/issues/29",
        classes=(0,),
        setup="""
        import torch_dct
        device = 'cuda'
        featurizers = {
            'dct': torch_dct.LinearDCT(64, 'dct', norm='ortho'),
            'identity': nn.Identity(),
        }
        classifier = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 5)).to(device)
        signals = torch.randn(8, 64).to(device)
        """,
        cell="""
        spectra = featurizers['dct'](signals)
        logits = classifier(spectra[:, :64])
        probs = logits.softmax(-1)
        """,
        culprit="featurizers['dct']",
        checks=("spectra", "logits"),
        needs=("torch_dct",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # cuda:0 and cpu!
    Case(
        id="torch-dct-jpeg-quant-table-global-in-a-helper",
        url="https://github.com/kornia/kornia/issues/3104",
        classes=(0,),
        setup="""
        import torch_dct
        device = 'cuda'
        # the JPEG luminance table, scaled for quality 75
        Q = torch.tensor([[16, 11, 10, 16, 24, 40, 51, 61]] * 8, dtype=torch.float32) * 0.5

        def soft_jpeg(blocks):
            coeffs = torch_dct.dct_2d(blocks, norm='ortho') * 255
            rounded = torch.round(coeffs / Q) * Q
            approx = rounded + (coeffs - coeffs.detach())     # straight-through rounding
            return torch_dct.idct_2d(approx / 255, norm='ortho')

        net = nn.Conv2d(1, 1, 3, padding=1).to(device)
        blocks = torch.rand(16, 1, 8, 8).to(device)
        """,
        cell="""
        out = net(blocks)
        compressed = soft_jpeg(out)
        loss = F.mse_loss(compressed, blocks)
        """,
        culprit="Q",
        checks=("compressed", "loss"),
        needs=("torch_dct",),
    ),
    # -- torchjd --------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got mat2 is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_out_mm)
    Case(
        id="torchjd-constant-aggregator-weights-on-the-cpu",
        url="https://github.com/meta-pytorch/torchrec/pull/4513",
        xfail="issue 27 mechanism 3: the library object's tensor is named (`aggregator.weighting.weights`) where the author names the aggregator; the fix runs",
        classes=(0,),
        setup=OPENREG
        + """
        from torchjd.aggregation import Constant
        from torchjd.autojac import backward, jac_to_grad
        shared = nn.Sequential(nn.Linear(10, 16), nn.ReLU()).to(device)
        head1, head2 = nn.Linear(16, 1).to(device), nn.Linear(16, 1).to(device)
        params = [*shared.parameters(), *head1.parameters(), *head2.parameters()]
        optimizer = torch.optim.SGD(params, lr=0.1)
        aggregator = Constant(torch.tensor([0.7, 0.3]))     # fixed task weights
        x = torch.randn(16, 10, device=device)
        y1, y2 = torch.randn(16, 1, device=device), torch.randn(16, 1, device=device)
        """,
        cell="""
        h = shared(x)
        loss1 = F.mse_loss(head1(h), y1)
        loss2 = F.mse_loss(head2(h), y2)
        optimizer.zero_grad()
        backward([loss1, loss2])
        jac_to_grad(params, aggregator)
        optimizer.step()
        """,
        culprit="aggregator",
        target="openreg:0",
        checks=("loss1", "shared[0].weight.grad"),
        fake=False,
        standin=True,
        needs=("torchjd",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two devices,
    # openreg:0 and cpu!
    Case(
        id="torchjd-mtl-backward-aux-target-left-in-the-batch",
        url="https://github.com/luigibonati/mlcolvar/pull/50",
        xfail="issue 27 mechanism 8: a dict built in the loop from a loop variable left on the CPU: `y_aux` is named and moved before the line, but the dict holds the old tensor (the fix belongs in the dict's literal)",
        classes=(0,),
        setup=OPENREG
        + """
        from torchjd.aggregation import PCGrad
        from torchjd.autojac import jac_to_grad, mtl_backward
        backbone = nn.Sequential(nn.Linear(10, 16), nn.ReLU()).to(device)
        cls_head, reg_head = nn.Linear(16, 3).to(device), nn.Linear(16, 1).to(device)
        optimizer = torch.optim.SGD([*backbone.parameters(), *cls_head.parameters(),
                                     *reg_head.parameters()], lr=0.05)
        aggregator = PCGrad()
        loader = DataLoader(TensorDataset(torch.randn(16, 10), torch.randint(0, 3, (16,)),
                                          torch.randn(16, 1)), batch_size=8)
        """,
        cell="""
        for x, y_cls, y_aux in loader:
            batch = {'x': x.to(device), 'y_cls': y_cls.to(device), 'y_aux': y_aux}
            feats = backbone(batch['x'])
            loss_cls = F.cross_entropy(cls_head(feats), batch['y_cls'])
            loss_aux = F.mse_loss(reg_head(feats), batch['y_aux'])
            optimizer.zero_grad()
            mtl_backward([loss_cls, loss_aux], features=feats)
            jac_to_grad(backbone.parameters(), aggregator)
            optimizer.step()
        """,
        culprit="batch['y_aux']",
        target="openreg:0",
        checks=("loss_aux", "backbone[0].weight.grad"),
        fake=False,
        standin=True,
        needs=("torchjd",),
    ),
]
