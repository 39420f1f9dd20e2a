"""The seventh corpus, fifth blind batch (issue 27), continued: stable-baselines3 policies,
poutyne's ``Model``, rtdl-revisiting-models and plain PyTorch shapes the corpus lacked
(``AveragedModel``, ``nn.TransformerEncoderLayer`` masks, LSTM state, ``EmbeddingBag``
offsets, complex FFT filters, ``index_add_`` pooling, ``torch.distributions.Beta``,
``torch.func.functional_call``, ``.numpy()``). See ``realworld_cases7.py``.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

#: A small PPO agent on Pendulum (continuous actions: a diagonal Gaussian policy).
PPO_AGENT = """
        import gymnasium as gym
        import numpy as np
        from stable_baselines3 import PPO
        env = gym.make('Pendulum-v1')
"""

FT_KWARGS = """
        ft_kwargs = dict(n_blocks=1, d_block=16, attention_n_heads=2, attention_dropout=0.0,
                         ffn_d_hidden=None, ffn_d_hidden_multiplier=2.0, ffn_dropout=0.0,
                         residual_dropout=0.0)
"""

CASES: list[Case] = [
    # -- stable-baselines3 ----------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="sb3-behaviour-cloning-actions-rebuilt-from-numpy",
        url="https://github.com/HumanCompatibleAI/imitation/issues/820",
        classes=(0,),
        setup=OPENREG
        + PPO_AGENT
        + """
        model = PPO('MlpPolicy', env, n_steps=16, batch_size=8, device=device,
                    policy_kwargs=dict(net_arch=[16]))
        demo_obs = np.random.randn(8, 3).astype('float32')      # expert transitions
        demo_acts = np.random.uniform(-2, 2, (8, 1)).astype('float32')
        obs = torch.as_tensor(demo_obs).to(model.device)
        acts = torch.as_tensor(demo_acts)
        """,
        cell="""
        values, log_prob, entropy = model.policy.evaluate_actions(obs, acts)
        bc_loss = -log_prob.mean() - 1e-3 * entropy.mean()
        """,
        culprit="acts",
        target="openreg:0",
        checks=("bc_loss", "values"),
        fake=False,
        standin=True,
        needs=("stable_baselines3", "gymnasium"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="sb3-features-extractor-plain-scale-tensor",
        url="https://github.com/DLR-RM/stable-baselines3/issues/111",
        classes=(2, 5),
        setup=OPENREG
        + PPO_AGENT
        + """
        from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

        class ScaledObs(BaseFeaturesExtractor):
            def __init__(self, observation_space):
                super().__init__(observation_space, features_dim=16)
                self.scale = torch.as_tensor(observation_space.high)   # cos, sin, velocity
                self.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh())

            def forward(self, obs):
                return self.net(obs / self.scale)

        model = PPO('MlpPolicy', env, n_steps=16, batch_size=8, device=device,
                    policy_kwargs=dict(features_extractor_class=ScaledObs, net_arch=[16]))
        obs_t = torch.as_tensor(np.random.randn(4, 3).astype('float32')).to(device)
        """,
        cell="actions, values, log_prob = model.policy(obs_t, deterministic=True)\n",
        culprit="model.policy.features_extractor.scale",
        target="openreg:0",
        checks=("values", "log_prob"),
        fake=False,
        standin=True,
        needs=("stable_baselines3", "gymnasium"),
    ),
    # Verified: TypeError: can't convert openreg:0 device type tensor to numpy. Use
    # Tensor.cpu() to copy the tensor to host memory first.
    Case(
        id="sb3-explained-variance-of-device-values",
        url="https://github.com/ivadomed/ivadomed/pull/1063",
        classes=(0,),
        setup=OPENREG
        + PPO_AGENT
        + """
        from stable_baselines3.common.utils import explained_variance
        model = PPO('MlpPolicy', env, n_steps=16, batch_size=8, device=device,
                    policy_kwargs=dict(net_arch=[16]))
        obs_t = torch.as_tensor(np.random.randn(16, 3).astype('float32')).to(device)
        returns = np.random.randn(16).astype('float32')
        with torch.no_grad():
            values = model.policy.predict_values(obs_t)
        """,
        cell="ev = explained_variance(values.numpy().ravel(), returns)\n",
        culprit="values",
        target="cpu",
        checks=("values",),
        fake=False,
        standin=True,
        needs=("stable_baselines3", "gymnasium"),
    ),
    # -- poutyne --------------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got weight is on cpu,
    # different from other tensors on openreg:0 (when checking argument in method
    # wrapper_PrivateUse1_output_nll_loss_forward)
    Case(
        id="poutyne-loss-function-reads-class-weights-from-the-notebook",
        url="https://github.com/freud14/poutyne/pull/25",
        classes=(2,),
        setup=OPENREG
        + """
        from poutyne import Model
        class_weights = torch.tensor([1.0, 2.5, 6.0])     # inverse class frequencies

        def weighted_ce(y_pred, y_true):
            return F.cross_entropy(y_pred, y_true, weight=class_weights)

        net = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3))
        model = Model(net, 'adam', weighted_ce, batch_metrics=['accuracy'], device=device)
        x_train, y_train = torch.randn(32, 5), torch.randint(0, 3, (32,))
        """,
        cell="history = model.fit(x_train, y_train, epochs=1, batch_size=8, verbose=False)\n",
        culprit="class_weights",
        target="openreg:0",
        checks=("class_weights", "net[0].weight"),
        fake=False,
        standin=True,
        needs=("poutyne",),
    ),
    # -- rtdl-revisiting-models -----------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="rtdl-categorical-columns-forgotten-in-the-loop",
        url="https://github.com/yandex-research/rtdl/issues/58",
        classes=(1,),
        setup="""
        from rtdl_revisiting_models import FTTransformer
        device = 'cuda'
        """
        + FT_KWARGS
        + """
        model = FTTransformer(n_cont_features=3, cat_cardinalities=[4, 6], d_out=2,
                              **ft_kwargs).to(device)
        x_cont, x_cat = torch.randn(12, 3), torch.stack([torch.randint(0, 4, (12,)),
                                                         torch.randint(0, 6, (12,))], 1)
        loader = DataLoader(TensorDataset(x_cont, x_cat, torch.randint(0, 2, (12,))),
                            batch_size=6)
        """,
        cell="""
        losses = []
        for xb_cont, xb_cat, yb in loader:
            xb_cont, yb = xb_cont.to(device), yb.to(device)
            losses.append(F.cross_entropy(model(xb_cont, xb_cat), yb))
        loss = torch.stack(losses).mean()
        """,
        culprit="xb_cat",
        checks=("loss",),
        needs=("rtdl_revisiting_models",),
    ),
    # Verified: Expected all tensors to be on the same device, but got self is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_Tensor_searchsorted)
    Case(
        id="rtdl-quantile-edges-kept-in-a-preprocessor",
        url="https://github.com/meta-pytorch/botorch/pull/1035",
        classes=(3,),
        setup=OPENREG
        + """
        from rtdl_revisiting_models import MLP

        class QuantileBinner:
            def __init__(self, x, n_bins=4):
                q = torch.linspace(0, 1, n_bins + 1)[1:-1]
                self.edges = torch.quantile(x, q, dim=0).T.contiguous()   # (features, n_bins - 1)
                self.n_bins = n_bins

            def __call__(self, x):
                bins = torch.searchsorted(self.edges, x.T.contiguous()).T
                return F.one_hot(bins, self.n_bins).flatten(1).float()

        x_train = torch.randn(64, 3)
        binner = QuantileBinner(x_train)
        mlp = MLP(d_in=3 * 4, d_out=1, n_blocks=2, d_block=16, dropout=0.0).to(device)
        x_batch = x_train[:8].to(device)
        """,
        cell="pred = mlp(binner(x_batch))\n",
        culprit="binner.edges",
        target="openreg:0",
        checks=("pred",),
        fake=False,
        standin=True,
        needs=("rtdl_revisiting_models",),
    ),
    # -- plain PyTorch --------------------------------------------------------------------
    # Verified: Expected all tensors to be on the same device, but got mat1 is on openreg:0,
    # different from other tensors on cpu (when checking argument in method
    # wrapper_PrivateUse1_out_addmm)
    Case(
        id="swa-averaged-model-copied-before-the-move",
        url="https://github.com/pytorch/pytorch/issues/62172",
        classes=(4, 7),
        setup=OPENREG
        + """
        from torch.optim.swa_utils import AveragedModel, SWALR
        model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
        swa_model = AveragedModel(model)
        model.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        swa_sched = SWALR(opt, swa_lr=0.01)
        batches = [(torch.randn(8, 6).to(device), torch.randn(8, 1).to(device)) for _ in range(2)]
        x_val = torch.randn(4, 6).to(device)
        """,
        cell="""
        for xb, yb in batches:
            opt.zero_grad()
            F.mse_loss(model(xb), yb).backward()
            opt.step()
        swa_model.update_parameters(model)
        swa_sched.step()
        val_pred = swa_model(x_val)
        """,
        culprit="swa_model",
        target="openreg:0",
        checks=("val_pred",),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="causal-mask-kept-as-a-class-attribute",
        url="https://github.com/pytorch/pytorch/pull/85609",
        classes=(2,),
        setup=OPENREG
        + """
        class TinyDecoder(nn.Module):
            causal_mask = nn.Transformer.generate_square_subsequent_mask(16)

            def __init__(self, vocab=50, d=16):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.block = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
                self.head = nn.Linear(d, vocab)

            def forward(self, tokens):
                t = tokens.shape[1]
                h = self.block(self.emb(tokens), src_mask=self.causal_mask[:t, :t])
                return self.head(h)

        lm = TinyDecoder().to(device)
        tokens = torch.randint(0, 50, (2, 10)).to(device)
        """,
        cell="logits = lm(tokens)\n",
        culprit="TinyDecoder.causal_mask",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
    ),
    # Verified: Input and hidden tensors are not at the same device, found input tensor at
    # cuda:0 and hidden tensor at cpu
    Case(
        id="lstm-cell-state-left-in-a-dataclass",
        url="https://github.com/pytorch/pytorch/issues/9534",
        classes=(5,),
        setup="""
        from dataclasses import dataclass
        device = 'cuda'

        @dataclass
        class Carry:
            h: torch.Tensor
            c: torch.Tensor

        lstm = nn.LSTM(8, 32, batch_first=True).to(device)
        head = nn.Linear(32, 1).to(device)
        carry = Carry(h=torch.zeros(1, 4, 32, device=device), c=torch.zeros(1, 4, 32))
        chunk = torch.randn(4, 5, 8, device=device)
        """,
        cell="""
        out, (h, c) = lstm(chunk, (carry.h, carry.c))
        carry = Carry(h=h.detach(), c=c.detach())
        forecast = head(out[:, -1])
        """,
        culprit="carry.c",
        checks=("forecast", "carry.c"),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="embeddingbag-offsets-from-a-cpu-collate",
        url="https://github.com/pytorch/pytorch/issues/7689",
        classes=(1,),
        setup="""
        device = 'cuda'

        class TextClassifier(nn.Module):
            def __init__(self, vocab=100, d=16, n_classes=4):
                super().__init__()
                self.embedding = nn.EmbeddingBag(vocab, d, mode='mean')
                self.fc = nn.Linear(d, n_classes)

            def forward(self, text, offsets):
                return self.fc(self.embedding(text, offsets))

        def collate_batch(batch):
            labels = torch.tensor([label for label, _ in batch])
            texts = [torch.tensor(ids) for _, ids in batch]
            offsets = torch.tensor([0] + [len(t) for t in texts[:-1]]).cumsum(0)
            return labels, torch.cat(texts), offsets

        samples = [(0, [4, 8, 15]), (2, [16, 23]), (1, [42, 7, 9, 11]), (3, [5])]
        loader = DataLoader(samples, batch_size=2, collate_fn=collate_batch)
        model = TextClassifier().to(device)
        """,
        cell="""
        for label, text, offsets in loader:
            label, text = label.to(device), text.to(device)
            loss = F.cross_entropy(model(text, offsets), label)
        """,
        culprit="offsets",
        checks=("loss",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="complex-fft-filter-kept-as-a-plain-attribute",
        url="https://github.com/phernst/pytorch_radon/pull/2",
        classes=(2, 5),
        setup="""
        device = 'cuda'

        class SpectralMixer(nn.Module):
            def __init__(self, n=32):
                super().__init__()
                self.filter = torch.exp(-torch.arange(n // 2 + 1) / 4.0).to(torch.cfloat)
                self.proj = nn.Linear(n, n)

            def forward(self, x):
                spec = torch.fft.rfft(x, dim=-1) * self.filter
                return self.proj(torch.fft.irfft(spec, n=x.shape[-1], dim=-1))

        mixer = SpectralMixer().to(device)
        signal = torch.randn(3, 32, device=device)
        """,
        cell="smoothed = mixer(signal)\n",
        culprit="mixer.filter",
        checks=("smoothed",),
    ),
    # Verified: index_add(): self, index and source expected to be in the same device, but
    # got (self) cuda:0, (index) cpu, and (source) cuda:0
    Case(
        id="index-add-pooling-with-cpu-segment-ids",
        url="https://github.com/aRI0U/RandLA-Net-pytorch/pull/29",
        classes=(1, 5),
        setup="""
        from collections import namedtuple
        device = 'cuda'
        Graph = namedtuple('Graph', 'x edge_index batch num_graphs')

        def global_add_pool(h, batch, size):
            return torch.zeros(size, h.shape[1], device=h.device).index_add_(0, batch, h)

        encoder = nn.Sequential(nn.Linear(5, 16), nn.ReLU()).to(device)
        g = Graph(x=torch.randn(7, 5).to(device),
                  edge_index=torch.tensor([[0, 1, 2, 4, 5], [1, 2, 0, 5, 6]]).to(device),
                  batch=torch.tensor([0, 0, 0, 1, 1, 1, 1]), num_graphs=2)
        """,
        cell="""
        h = encoder(g.x)
        graph_emb = global_add_pool(h, g.batch, g.num_graphs)
        """,
        culprit="g.batch",
        checks=("graph_emb",),
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, openreg:0 and cpu!
    Case(
        id="mixup-beta-distribution-on-the-cpu",
        url="https://github.com/ivadomed/ivadomed/issues/1062",
        xfail="issue 27 mechanism 3: `lam`, sampled in the cell, named rather than the distribution `mix` it came from",
        classes=(3,),
        setup=OPENREG
        + """
        mix = torch.distributions.Beta(torch.tensor([0.4]), torch.tensor([0.4]))
        net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
        x = torch.randn(6, 10).to(device)
        y = F.one_hot(torch.randint(0, 4, (6,)), 4).float().to(device)
        """,
        cell="""
        lam = mix.sample((x.shape[0],))
        perm = torch.randperm(x.shape[0], device=device)
        x_mix, y_mix = lam * x + (1 - lam) * x[perm], lam * y + (1 - lam) * y[perm]
        loss = -(y_mix * net(x_mix).log_softmax(-1)).sum(-1).mean()
        """,
        culprit="mix",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
    ),
    # Verified: Expected all tensors to be on the same device, but found at least two
    # devices, cuda:0 and cpu!
    Case(
        id="functional-call-params-captured-before-the-move",
        url="https://github.com/deepchem/deepchem/pull/4738",
        xfail="issue 27 mechanism 4: `inner['0.weight']`, made in the cell, named rather than `params` it came from",
        classes=(4,),
        setup="""
        from torch.func import functional_call
        device = 'cuda'
        model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
        params = {k: v.detach() for k, v in model.named_parameters()}
        model.to(device)
        x = torch.randn(8, 4, device=device)
        """,
        cell="""
        inner = {k: v - 0.01 * torch.ones_like(v) for k, v in params.items()}   # a MAML-style step
        y_adapted = functional_call(model, inner, (x,))
        """,
        culprit="params",
        checks=("y_adapted",),
    ),
    # -- other errors: the panel stays quiet ----------------------------------------------
    # Verified: IndexError: index out of range in self
    Case(
        id="quiet-rtdl-categorical-value-out-of-range",
        url="https://github.com/pytorch/pytorch/issues/89362",
        classes=(0,),
        setup=OPENREG
        + FT_KWARGS
        + """
        from rtdl_revisiting_models import FTTransformer
        model = FTTransformer(n_cont_features=2, cat_cardinalities=[3], d_out=1,
                              **ft_kwargs).to(device)
        x_cont = torch.randn(4, 2).to(device)
        x_cat = torch.tensor([[0], [2], [3], [1]]).to(device)   # category 3 unseen in training
        """,
        cell="pred = model(x_cont, x_cat)\n",
        quiet=True,
        fake=False,
        standin=True,
        needs=("rtdl_revisiting_models",),
    ),
    # Verified: index_add_(): Expected dtype int32/int64 for index but got: Float
    Case(
        id="quiet-index-add-with-float-segment-ids",
        url="https://github.com/pytorch/pytorch/issues/72055",
        classes=(0,),
        setup=OPENREG
        + """
        h = torch.randn(5, 8).to(device)
        batch = torch.tensor([0.0, 0.0, 1.0, 1.0, 1.0]).to(device)   # read from a float column
        """,
        cell="pooled = torch.zeros(2, 8, device=device).index_add_(0, batch, h)\n",
        quiet=True,
        fake=False,
        standin=True,
    ),
]
