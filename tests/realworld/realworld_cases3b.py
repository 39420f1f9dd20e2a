"""The third corpus, first blind batch (issue 27), continued: paths through
parametrizations and module lists (mechanism 5), culprit ranking (6), split models (7),
a discarded ``.to()`` (8), other shapes of the reports (optimizer state, ``.numpy()``,
a convolution's input, an RNN's hidden state, ``torch.load``) with torchdiffeq,
torch-ema, vector-quantize-pytorch, x-transformers, skorch, normflows, kornia and
``torch.func``, and other errors the panel must leave alone. See ``realworld_cases3.py``.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

CASES: list[Case] = [
    # -- 5. paths through parametrizations and module lists -------------------------------
    Case(
        id="parametrization-keeps-its-mask-as-plain-attribute",
        url="https://github.com/norse/norse/pull/397",
        classes=(5,),
        setup="""
        import torch.nn.utils.parametrize as P

        class PruneMask(nn.Module):
            def __init__(self, mask):
                super().__init__()
                self.mask = mask

            def forward(self, W):
                return W * self.mask

        layer = nn.Linear(4, 3)
        P.register_parametrization(layer, 'weight', PruneMask(torch.ones(3, 4).tril()))
        layer = layer.to('cuda')
        x = torch.randn(2, 4, device='cuda')
        """,
        cell="y = layer(x)\n",
        culprit="layer.parametrizations.weight[0].mask",
        checks=("y",),
    ),
    Case(
        id="low-rank-parametrization-registered-after-the-move",
        url="https://github.com/Deci-AI/super-gradients/pull/632",
        classes=(5,),
        setup="""
        import torch.nn.utils.parametrize as P

        class LowRankDelta(nn.Module):
            def __init__(self, out_f, in_f, r=2):
                super().__init__()
                self.A = nn.Parameter(torch.zeros(out_f, r))
                self.B = nn.Parameter(torch.randn(r, in_f))

            def forward(self, W):
                return W + self.A @ self.B

        model = nn.Sequential(nn.Linear(6, 6), nn.ReLU(), nn.Linear(6, 2)).to('cuda')
        P.register_parametrization(model[2], 'weight', LowRankDelta(2, 6), unsafe=True)
        x = torch.randn(3, 6, device='cuda')
        """,
        cell="logits = model(x)\n",
        culprit="model[2].parametrizations.weight[0]",
        checks=("logits",),
    ),
    # -- 6. culprit ranking ---------------------------------------------------------------
    Case(
        id="dqn-gather-with-actions-from-the-replay-buffer",
        url="https://github.com/DeepRLChinese/DeepRL-Chinese/issues/4",
        classes=(6,),
        setup="""
        q_net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)).to('cuda')
        states = torch.randn(8, 4, device='cuda')
        next_states = torch.randn(8, 4, device='cuda')
        # sampled from a replay buffer kept in host memory
        actions = torch.randint(0, 2, (8, 1))
        rewards = torch.randn(8)
        """,
        cell="""
        q = q_net(states).gather(1, actions).squeeze(1)
        target = rewards + 0.99 * q_net(next_states).max(1).values
        loss = F.mse_loss(q, target)
        """,
        culprit="actions",
        checks=("q", "loss"),
    ),
    Case(
        id="segmentation-targets-beside-a-stray-weight",
        url="https://github.com/asahi417/lmppl/pull/12",
        classes=(6,),
        setup=OPENREG
        + """
        class_weights = torch.tensor([0.2, 1.0, 3.0])   # kept on the CPU by the data module
        criterion = nn.CrossEntropyLoss(weight=class_weights).to(device)
        seg_head = nn.Conv2d(4, 3, 1).to(device)
        feats = torch.randn(2, 4, 6, 6).to(device)
        masks = torch.randint(0, 3, (2, 6, 6))
        """,
        cell="loss = criterion(seg_head(feats), masks)\n",
        culprit="masks",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
    ),
    Case(
        id="engine-state-metric-criterion-weight",
        url="https://github.com/Project-MONAI/MONAI/pull/6695",
        classes=(6, 3),
        setup="""
        from types import SimpleNamespace

        class Engine:
            def __init__(self, model, metrics):
                self.model = model
                self.state = SimpleNamespace(metrics=metrics, epoch=0)

            def run(self, x, y):
                out = self.model(x)
                return {name: fn(out, y) for name, fn in self.state.metrics.items()}

        model = nn.Linear(4, 3).to('cuda')
        baseline_logits = torch.zeros(6, 3)    # a CPU tensor nearby, never used here
        evaluator = Engine(model, {'nll': nn.CrossEntropyLoss(weight=torch.tensor([1., 2., 1.]))})
        x = torch.randn(6, 4, device='cuda')
        y = torch.randint(0, 3, (6,), device='cuda')
        """,
        cell="scores = evaluator.run(x, y)\n",
        culprit="evaluator.state.metrics['nll'].weight",
        checks=("scores['nll']",),
    ),
    # -- 7. split models ------------------------------------------------------------------
    Case(
        id="shared-encoder-moved-by-the-other-model",
        url="https://github.com/leggedrobotics/rsl_rl/pull/189",
        classes=(7,),
        setup="""
        encoder = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
        policy = nn.Sequential(encoder, nn.Linear(16, 2))
        value = nn.Sequential(encoder, nn.Linear(16, 1))
        value.to('cuda')          # moves the shared encoder too
        obs = torch.randn(4, 6, device='cuda')
        """,
        cell="logits = policy(obs)\nv = value(obs)\n",
        culprit="policy[1]",
        checks=("logits", "v"),
    ),
    Case(
        id="embedding-offloaded-to-the-cpu-on-purpose",
        url="https://github.com/unslothai/unsloth/pull/8272",
        classes=(7,),
        setup=OPENREG
        + """
        class OffloadedLM(nn.Module):
            def __init__(self, vocab=50, d=8):
                super().__init__()
                self.embed = nn.Embedding(vocab, d)   # kept in RAM to save GPU memory
                self.body = nn.Linear(d, vocab)

            def forward(self, ids):
                h = self.embed(ids)
                return self.body(h.to(self.body.weight.device))

        lm = OffloadedLM()
        lm.body.to(device)
        ids = torch.randint(0, 50, (2, 5)).to(device)
        """,
        cell="logits = lm(ids)\n",
        culprit="ids",
        target="cpu",
        fake=False,
        standin=True,
    ),
    # -- 8. a discarded .to() ---------------------------------------------------------------
    Case(
        id="to-result-discarded-in-the-cell",
        url="https://theneuralbase.com/pytorch/learn/beginner/tensor-device-cpu-vs-cuda/",
        classes=(8,),
        setup="""
        device = torch.device('cuda')
        model = nn.Linear(10, 2).to(device)
        inputs = torch.randn(4, 10)
        """,
        cell="inputs.to(device)\noutputs = model(inputs)\n",
        culprit="inputs",
        checks=("outputs",),
        fix_has="inputs = inputs.to(device)",
    ),
    Case(
        id="to-result-discarded-in-a-function",
        url="https://theneuralbase.com/pytorch/learn/intermediate/loading-on-different-devices/",
        classes=(8,),
        setup="""
        device = 'cuda'
        net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3)).to(device)

        def predict(net, batch):
            batch.to(device)
            return net(batch).argmax(-1)

        batch = torch.randn(6, 5)
        """,
        cell="preds = predict(net, batch)\n",
        culprit="batch in predict",
        checks=("preds",),
        fix_has="batch = batch.to(device)",
    ),
    # -- other shapes of the reports ----------------------------------------------------------
    Case(
        id="adagrad-state-made-before-the-move",
        url="https://github.com/pytorch/pytorch/issues/76752",
        classes=(3,),
        setup=OPENREG
        + """
        model = nn.Linear(3, 3)
        opt = torch.optim.Adagrad(model.parameters(), lr=0.1)   # makes its state now
        # model.to() on a GPU keeps the Parameter objects (the optimizer's); the stand-in
        # device keeps them when the parameters are swapped in place
        torch.__future__.set_swap_module_params_on_conversion(True)
        model.to(device)
        torch.__future__.set_swap_module_params_on_conversion(False)
        for p in model.parameters():
            p.grad = torch.ones_like(p)
        """,
        cell="opt.step()\n",
        culprit="opt.state[model.weight]['sum']",
        target="openreg:0",
        checks=("opt.state[model.weight]['sum']", "opt.state[model.bias]['sum']"),
        fake=False,
        standin=True,
    ),
    Case(
        id="numpy-of-a-distance-matrix-on-the-gpu",
        url="https://github.com/JDAI-CV/fast-reid/pull/509",
        classes=(0,),
        setup=OPENREG
        + """
        import numpy as np
        query_feats = torch.randn(3, 8).to(device)
        gallery_feats = torch.randn(5, 8).to(device)
        """,
        cell="distmat = torch.cdist(query_feats, gallery_feats)\nranks = np.argsort(distmat.numpy(), axis=1)\n",
        culprit="distmat",
        target="cpu",
        fake=False,
        standin=True,
    ),
    Case(
        id="conv-input-from-numpy-left-on-cpu",
        url="https://github.com/ANYMS-A/Skeleton_Aware_Networks_for_Deep_Motion_Retargeting/issues/1",
        classes=(0,),
        setup=OPENREG
        + """
        import numpy as np
        static_enc = nn.Sequential(nn.Conv1d(6, 8, 3, padding=1), nn.ReLU()).to(device)
        static_a = torch.from_numpy(np.random.rand(1, 6, 10).astype('float32'))
        """,
        cell="s_latent = static_enc(static_a)\n",
        culprit="static_a",
        target="openreg:0",
        checks=("s_latent",),
        fake=False,
        standin=True,
    ),
    Case(
        id="rnn-hidden-state-kept-as-attribute",
        url="https://github.com/rociomer/dl-chem-101/issues/10",
        classes=(0,),
        setup=OPENREG
        + """
        class CharRNN(nn.Module):
            def __init__(self, vocab=20, d=8, hidden=16):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.rnn = nn.RNN(d, hidden, batch_first=True)
                self.out = nn.Linear(hidden, vocab)
                self.reset(1)

            def reset(self, batch):
                self.hidden = torch.zeros(1, batch, self.rnn.hidden_size)

            def forward(self, tok):
                h, self.hidden = self.rnn(self.emb(tok), self.hidden)
                return self.out(h)

        char_rnn = CharRNN().to(device)
        tok = torch.randint(0, 20, (1, 1)).to(device)
        """,
        cell="logits = char_rnn(tok)\n",
        culprit="char_rnn.hidden",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
    ),
    Case(
        id="torch-load-of-an-embedding-table",
        url="https://github.com/nitzanlab/biolord/issues/14",
        classes=(0,),
        setup=OPENREG
        + """
        import os
        import tempfile
        path = os.path.join(tempfile.mkdtemp(), 'emb.pt')
        torch.save(torch.randn(30, 8), path)
        encoder = nn.Linear(8, 4).to(device)
        emb_table = torch.load(path)
        ids = torch.tensor([[1, 2, 3]]).to(device)
        """,
        cell="h = F.embedding(ids, emb_table)\nz = encoder(h)\n",
        culprit="emb_table",
        target="openreg:0",
        checks=("z",),
        fake=False,
        standin=True,
    ),
    # -- libraries ------------------------------------------------------------------------------
    Case(
        id="torchdiffeq-odefunc-reads-a-global-matrix",
        url="https://github.com/rtqichen/torchdiffeq/issues/168",
        classes=(0,),
        setup=OPENREG
        + """
        from torchdiffeq import odeint
        true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]])

        class Lambda(nn.Module):
            def forward(self, t, y):
                return torch.mm(y ** 3, true_A)

        true_y0 = torch.tensor([[2.0, 0.0]]).to(device)
        t = torch.linspace(0.0, 0.5, 4).to(device)
        """,
        cell="true_y = odeint(Lambda(), true_y0, t, method='rk4', options={'step_size': 0.125})\n",
        culprit="true_A",
        target="openreg:0",
        checks=("true_y",),
        fake=False,
        standin=True,
        needs=("torchdiffeq",),
    ),
    Case(
        id="torchdiffeq-odefunc-module-left-on-cpu",
        url="https://github.com/tksmatsubara/symplectic-adjoint-method/issues/2",
        classes=(0,),
        setup=OPENREG
        + """
        from torchdiffeq import odeint

        class ODEFunc(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))

            def forward(self, t, y):
                return self.net(y)

        func = ODEFunc()
        y0 = torch.randn(4, 2).to(device)
        t = torch.tensor([0.0, 0.5]).to(device)
        """,
        cell="traj = odeint(func, y0, t, method='rk4', options={'step_size': 0.25})\n",
        culprit="func",
        target="openreg:0",
        checks=("traj",),
        fake=False,
        standin=True,
        needs=("torchdiffeq",),
    ),
    Case(
        id="torch-ema-built-before-the-model-moved",
        url="https://github.com/huggingface/pytorch-image-models/issues/2127",
        classes=(0,),
        setup=OPENREG
        + """
        from torch_ema import ExponentialMovingAverage
        model = nn.Linear(4, 2)
        ema = ExponentialMovingAverage(model.parameters(), decay=0.99)
        model.to(device)
        """,
        cell="ema.update(model.parameters())\n",
        culprit="ema",
        target="openreg:0",
        checks=("ema.shadow_params[0]",),
        fake=False,
        standin=True,
        needs=("torch_ema",),
    ),
    Case(
        id="vector-quantizer-left-on-cpu",
        url="https://github.com/lucidrains/vector-quantize-pytorch/issues/37",
        classes=(0,),
        setup=OPENREG
        + """
        from vector_quantize_pytorch import VectorQuantize
        vq = VectorQuantize(dim=16, codebook_size=32, decay=0.8, commitment_weight=1.0)
        x = torch.randn(1, 24, 16).to(device)
        """,
        cell="quantized, indices, commit_loss = vq(x)\n",
        culprit="vq",
        target="openreg:0",
        checks=("quantized", "indices"),
        fake=False,
        standin=True,
        needs=("vector_quantize_pytorch",),
    ),
    Case(
        id="x-transformers-mask-left-on-cpu",
        url="https://github.com/SamLynnEvans/Transformer/issues/30",
        classes=(0,),
        setup=OPENREG
        + """
        from x_transformers import Encoder, TransformerWrapper
        model = TransformerWrapper(num_tokens=20, max_seq_len=16,
                                   attn_layers=Encoder(dim=16, depth=1, heads=2)).to(device)
        tokens = torch.randint(0, 20, (2, 8)).to(device)
        mask = torch.ones(2, 8, dtype=torch.bool)
        mask[1, 6:] = False
        """,
        cell="logits = model(tokens, mask=mask)\n",
        culprit="mask",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
        needs=("x_transformers",),
    ),
    Case(
        id="skorch-module-with-a-plain-tensor-attribute",
        url="https://github.com/skorch-dev/skorch/issues/706",
        classes=(0,),
        setup=OPENREG
        + """
        import numpy as np
        from skorch import NeuralNetClassifier

        class TempScaled(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 3)
                self.temperature = torch.tensor([2.0, 2.0, 2.0])

            def forward(self, X):
                return (self.fc(X) / self.temperature).softmax(-1)

        net = NeuralNetClassifier(TempScaled, device=device, max_epochs=1)
        net.initialize()
        X = np.random.rand(6, 4).astype('float32')
        """,
        cell="proba = net.predict_proba(X)\n",
        culprit="net.module_.temperature",
        target="openreg:0",
        fake=False,
        standin=True,
        needs=("skorch",),
    ),
    Case(
        id="normflows-target-samples-left-on-cpu",
        url="https://github.com/thoglu/jammy_flows/issues/2",
        classes=(0,),
        setup=OPENREG
        + """
        import normflows as nf
        base = nf.distributions.base.DiagGaussian(2)
        flows = [nf.flows.AffineConstFlow((2,)) for _ in range(2)]
        nfm = nf.NormalizingFlow(base, flows).to(device)
        target = nf.distributions.TwoMoons()
        x = target.sample(16)
        """,
        cell="loss = nfm.forward_kld(x)\n",
        culprit="x",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
        needs=("normflows",),
    ),
    Case(
        id="kornia-identity-starts-a-list-of-homographies",
        url="https://github.com/kornia/tutorials/issues/21",
        classes=(0,),
        setup=OPENREG
        + """
        import kornia.geometry.transform as KT
        corners = torch.tensor([[[0., 0.], [1., 0.], [1., 1.], [0., 1.]]])
        models = [KT.get_perspective_transform(corners, corners + 0.1 * k).to(device)
                  for k in range(3)]
        """,
        cell="""
        models_to_final = [torch.eye(3)[None]]
        for m in models[::-1]:
            models_to_final.append(m @ models_to_final[-1])
        models_to_final = models_to_final[::-1]
        """,
        culprit="models_to_final[0]",
        target="openreg:0",
        checks=("models_to_final[0]", "models_to_final[-1]"),
        fake=False,
        standin=True,
        needs=("kornia",),
    ),
    # -- other errors: the panel stays quiet ----------------------------------------------------
    Case(
        id="quiet-kornia-warp-with-a-2x2-matrix",
        url="https://github.com/kornia/kornia/issues/1249",
        classes=(0,),
        setup="""
        import kornia.geometry.transform as KT
        image = torch.rand(1, 1, 4, 4)
        M = torch.eye(2)[None]      # an affine 2x2 where a 3x3 homography is expected
        """,
        cell="warped = KT.warp_perspective(image, M, (4, 4))\n",
        quiet=True,
        fake=False,
        needs=("kornia",),
    ),
    Case(
        id="quiet-torchdiffeq-times-not-increasing",
        url="https://github.com/rtqichen/torchdiffeq/issues/66",
        classes=(0,),
        setup="""
        from torchdiffeq import odeint
        func = lambda t, y: -y
        y0 = torch.ones(2)
        """,
        cell="ys = odeint(func, y0, torch.tensor([0.0, 1.0, 0.5]))\n",
        quiet=True,
        fake=False,
        needs=("torchdiffeq",),
    ),
    Case(
        id="quiet-distribution-scale-not-positive",
        url="https://github.com/pytorch/pytorch/issues/7795",
        classes=(0,),
        setup="from torch.distributions import Normal\nloc = torch.zeros(3)\n",
        cell="prior = Normal(loc, loc - 1.0)\n",
        quiet=True,
        fake=False,
    ),
    Case(
        id="quiet-vector-quantizer-feature-size-mismatch",
        url="https://github.com/lucidrains/vector-quantize-pytorch/issues/110",
        classes=(0,),
        setup="""
        from vector_quantize_pytorch import VectorQuantize
        vq = VectorQuantize(dim=16, codebook_size=32)
        """,
        cell="quantized, indices, loss = vq(torch.randn(1, 10, 8))\n",
        quiet=True,
        fake=False,
        needs=("vector_quantize_pytorch",),
    ),
    Case(
        id="quiet-skorch-predict-before-fit",
        url="https://github.com/skorch-dev/skorch/issues/930",
        classes=(0,),
        setup="""
        import numpy as np
        from skorch import NeuralNetClassifier
        net = NeuralNetClassifier(nn.Sequential(nn.Linear(4, 2), nn.Softmax(-1)), max_epochs=1)
        """,
        cell="pred = net.predict(np.random.rand(3, 4).astype('float32'))\n",
        quiet=True,
        fake=False,
        needs=("skorch",),
    ),
    Case(
        id="quiet-x-transformers-sequence-too-long",
        url="https://github.com/LYH-YF/MWPToolkit/issues/27",
        classes=(0,),
        setup="""
        from x_transformers import Decoder, TransformerWrapper
        model = TransformerWrapper(num_tokens=20, max_seq_len=8,
                                   attn_layers=Decoder(dim=16, depth=1, heads=2))
        """,
        cell="logits = model(torch.randint(0, 20, (1, 12)))\n",
        quiet=True,
        fake=False,
        needs=("x_transformers",),
    ),
]
