"""The sixth corpus, fourth blind batch (issue 27), continued: aliases kept from before a move
(mechanism 4), paths through a ``ParameterList``, a ``ModuleDict`` in a ``ModuleList``, a plain
list of loss modules and a ``Sequential`` grown after the move (5), culprit ranking (6), a
simulator and an embedding table kept on the CPU on purpose (7) and discarded ``.to()``
results (8). See ``realworld_cases6.py``.
"""

from __future__ import annotations

from realworld import Case

OPENREG = """
        device = 'openreg'  # the stand-in device (standin.py) for the report's GPU
"""

#: tensordict's ``.to()`` waits on the device module's ``synchronize()``; the stand-in has
#: no streams to wait for.
TENSORDICT = (
    OPENREG
    + """
        torch.openreg.synchronize = lambda device=None: None
"""
)

CASES: list[Case] = [
    # -- 4. aliases -------------------------------------------------------------------------
    Case(
        id="causal-mask-buffer-kept-before-the-move",
        url="https://github.com/mlverse/torch/pull/1473",
        classes=(4,),
        setup="""
        device = 'cuda'

        class CausalSelfAttention(nn.Module):
            def __init__(self, d=16, n=8):
                super().__init__()
                self.qkv = nn.Linear(d, 3 * d)
                self.register_buffer('causal', torch.tril(torch.ones(n, n, dtype=torch.bool)))

            def forward(self, x, mask):
                q, k, v = self.qkv(x).chunk(3, -1)
                t = x.shape[1]
                att = (q @ k.transpose(1, 2)).masked_fill(~mask[:t, :t], float('-inf'))
                return att.softmax(-1) @ v

        attn = CausalSelfAttention()
        mask = attn.causal                    # kept to share with the decoder
        attn.to(device)
        x = torch.randn(2, 8, 16, device=device)
        """,
        cell="y = attn(x, mask)\n",
        culprit="mask",
        checks=("y",),
    ),
    Case(
        id="tensordict-observation-read-before-the-move",
        url="https://github.com/thu-ml/tianshou/issues/727",
        classes=(4,),
        setup=TENSORDICT
        + """
        from tensordict import TensorDict
        from tensordict.nn import TensorDictModule
        qnet = TensorDictModule(nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2)),
                                in_keys=['observation'], out_keys=['action_value']).to(device)
        rollout = TensorDict({'observation': torch.randn(16, 4),
                              'action': torch.randint(0, 2, (16, 1))}, batch_size=[16])
        obs = rollout['observation']                  # kept for the value plot
        rollout = rollout.to(device)
        """,
        cell="""
        q_taken = qnet(rollout)['action_value'].gather(1, rollout['action'])
        greedy_values = qnet.module(obs).max(-1).values
        """,
        culprit="obs",
        target="openreg:0",
        checks=("q_taken", "greedy_values"),
        fake=False,
        standin=True,
        needs=("tensordict",),
    ),
    Case(
        id="normalization-stats-unpacked-before-the-move",
        url="https://github.com/speechbrain/speechbrain/issues/1434",
        classes=(4,),
        setup=OPENREG
        + """
        from pytorch_tabnet.tab_network import TabNetNoEmbeddings
        train_num = torch.randn(64, 4) * 3 + 1
        mean, std = train_num.mean(0), train_num.std(0)
        norm_stats = {'mean': mean, 'std': std}
        norm_stats = {k: v.to(device) for k, v in norm_stats.items()}

        def normalize(x):
            return (x - mean) / std

        model = TabNetNoEmbeddings(input_dim=4, output_dim=2, n_d=4, n_a=4, n_steps=2,
                                   group_attention_matrix=torch.eye(4).to(device)).to(device)
        batch = (torch.randn(8, 4) * 3 + 1).to(device)
        """,
        cell="logits, sparsity_loss = model(normalize(batch))\n",
        culprit="mean",
        target="openreg:0",
        checks=("logits",),
        fake=False,
        standin=True,
        needs=("pytorch_tabnet",),
    ),
    Case(
        id="lion-gradient-accumulators-made-before-the-move",
        url="https://github.com/pytorch/pytorch/issues/35797",
        classes=(4, 6),
        setup=OPENREG
        + """
        from lion_pytorch import Lion
        model = nn.Sequential(nn.Linear(6, 16), nn.GELU(), nn.Linear(16, 1))
        grad_accum = [torch.zeros_like(p) for p in model.parameters()]
        model.to(device)
        opt = Lion(model.parameters(), lr=1e-4, weight_decay=1e-2)
        micro_batches = [(torch.randn(4, 6).to(device), torch.randn(4, 1).to(device)) for _ in range(2)]
        """,
        cell="""
        for xb, yb in micro_batches:
            model.zero_grad()
            F.mse_loss(model(xb), yb).backward()
            for acc, p in zip(grad_accum, model.parameters()):
                acc += p.grad / len(micro_batches)
        for acc, p in zip(grad_accum, model.parameters()):
            p.grad = acc.clone()
        opt.step()
        """,
        culprit="grad_accum[0]",
        target="openreg:0",
        checks=("grad_accum[0]", "grad_accum[3]", "model[0].weight"),
        fake=False,
        standin=True,
        needs=("lion_pytorch",),
    ),
    # -- 5. paths through containers ------------------------------------------------------
    Case(
        id="prompt-pool-grown-after-the-move",
        url="https://github.com/pytorch/pytorch/issues/94828",
        classes=(5,),
        setup=OPENREG
        + """
        from linear_attention_transformer import LinearAttentionTransformer

        class PromptedEncoder(nn.Module):
            def __init__(self, d=16, prompt_len=2):
                super().__init__()
                self.prompts = nn.ParameterList([nn.Parameter(torch.randn(prompt_len, d) * 0.02)])
                self.body = LinearAttentionTransformer(dim=d, heads=2, depth=1, max_seq_len=32)

            def add_task(self):
                self.prompts.append(nn.Parameter(torch.randn(self.prompts[0].shape) * 0.02))

            def forward(self, x, task):
                p = self.prompts[task].expand(x.shape[0], -1, -1)
                return self.body(torch.cat([p, x], 1))

        model = PromptedEncoder().to(device)
        model.add_task()                          # the second task arrives after the move
        x = torch.randn(2, 6, 16).to(device)
        """,
        cell="""
        h_old = model(x, task=0)
        h_new = model(x, task=1)
        """,
        culprit="model.prompts[1]",
        target="openreg:0",
        checks=("h_old", "h_new"),
        fake=False,
        standin=True,
        needs=("linear_attention_transformer",),
    ),
    Case(
        id="e3nn-linear-swapped-into-a-block-dict",
        url="https://github.com/mariogeiger/se3cnn/issues/27",
        classes=(5,),
        setup=OPENREG
        + """
        from e3nn import o3
        irreps = o3.Irreps('8x0e + 4x1o')

        class EquivariantStack(nn.Module):
            def __init__(self, depth=3):
                super().__init__()
                self.blocks = nn.ModuleList(
                    nn.ModuleDict({'mix': o3.Linear(irreps, irreps), 'gate': o3.Linear(irreps, '1x0e')})
                    for _ in range(depth))

            def forward(self, x):
                for block in self.blocks:
                    x = x + block['mix'](x) * torch.sigmoid(block['gate'](x))
                return x

        model = EquivariantStack().to(device)
        model.blocks[1]['mix'] = o3.Linear(irreps, irreps)   # re-initialised for fine-tuning
        feats = irreps.randn(5, -1).to(device)
        """,
        cell="out = model(feats)\n",
        culprit="model.blocks[1]['mix']",
        target="openreg:0",
        checks=("out",),
        fake=False,
        standin=True,
        needs=("e3nn",),
    ),
    Case(
        id="per-position-losses-kept-in-a-python-list",
        url="https://github.com/pytorch/pytorch/issues/1053",
        classes=(5,),
        setup=OPENREG
        + """
        class PlateReader(nn.Module):
            def __init__(self, letter_weights, n_chars=10):
                super().__init__()
                self.backbone = nn.Sequential(nn.Linear(12, 32), nn.ReLU())
                self.heads = nn.ModuleList(nn.Linear(32, n_chars) for _ in letter_weights)
                self.criterions = [nn.CrossEntropyLoss(weight=w) for w in letter_weights]

            def loss(self, x, y):
                h = self.backbone(x)
                return sum(crit(head(h), y[:, i])
                           for i, (crit, head) in enumerate(zip(self.criterions, self.heads)))

        letter_weights = [torch.rand(10) + 0.5 for _ in range(3)]   # one per plate position
        reader = PlateReader(letter_weights).to(device)
        x = torch.randn(4, 12).to(device)
        y = torch.randint(0, 10, (4, 3)).to(device)
        """,
        cell="loss = reader.loss(x, y)\n",
        culprit="reader.criterions[0]",
        target="openreg:0",
        checks=("loss",),
        fake=False,
        standin=True,
    ),
    Case(
        id="layer-norm-inserted-after-the-move",
        url="https://github.com/jarviszhb/KnowledgeTracing/pull/1",
        classes=(5,),
        setup="""
        device = 'cuda'
        head = nn.Sequential(nn.Linear(32, 16), nn.GELU(), nn.Linear(16, 4)).to(device)
        head.insert(1, nn.LayerNorm(16))          # added while tuning, after the move
        feats = torch.randn(8, 32, device=device)
        """,
        cell="logits = head(feats)\n",
        culprit="head[1]",
        checks=("logits",),
    ),
    # -- 6. culprit ranking ---------------------------------------------------------------
    Case(
        id="molecule-dict-from-the-cpu-collate",
        url="https://github.com/Lung-Yi/rxn_yield_context/issues/3",
        classes=(6,),
        setup=OPENREG
        + """
        from e3nn import o3

        class TinyEquivariantConv(nn.Module):
            def __init__(self, n_types=10):
                super().__init__()
                self.embed = nn.Embedding(n_types, 8)
                self.irreps_sh = o3.Irreps.spherical_harmonics(1)
                self.tp = o3.FullyConnectedTensorProduct('8x0e', self.irreps_sh, '8x0e + 4x1o')

            def forward(self, z, pos, edge_index):
                h = self.embed(z)
                src, dst = edge_index
                sh = o3.spherical_harmonics(self.irreps_sh, pos[dst] - pos[src], normalize=True)
                msg = self.tp(h[src], sh)
                return torch.zeros(len(z), msg.shape[1], device=msg.device).index_add_(0, dst, msg)

        net = TinyEquivariantConv().to(device)
        graph = {'z': torch.tensor([6, 1, 1, 1, 1]), 'pos': torch.randn(5, 3),
                 'edge_index': torch.tensor([[0, 0, 0, 0, 1, 2, 3, 4], [1, 2, 3, 4, 0, 0, 0, 0]])}
        """,
        cell="node_out = net(graph['z'], graph['pos'], graph['edge_index'])\n",
        culprit="graph['z']",
        target="openreg:0",
        checks=("node_out",),
        fake=False,
        standin=True,
        needs=("e3nn",),
    ),
    Case(
        id="linear-attention-lm-never-moved",
        url="https://github.com/spro/practical-pytorch/issues/3",
        classes=(6,),
        setup=OPENREG
        + """
        from linear_attention_transformer import LinearAttentionTransformerLM
        lm = LinearAttentionTransformerLM(num_tokens=64, dim=16, heads=2, depth=1, max_seq_len=16,
                                          causal=True)
        ids = torch.randint(0, 64, (2, 12)).to(device)
        targets = torch.roll(ids, -1, dims=1)
        """,
        cell="""
        logits = lm(ids)
        loss = F.cross_entropy(logits.transpose(1, 2), targets)
        """,
        culprit="lm",
        target="openreg:0",
        checks=("logits", "loss"),
        fake=False,
        standin=True,
        needs=("linear_attention_transformer",),
    ),
    Case(
        id="zero-shot-text-features-embedded-once-on-the-cpu",
        url="https://github.com/voxel51/fiftyone/pull/2201",
        classes=(6,),
        setup=OPENREG
        + """
        image_encoder = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32)).to(device)
        text_encoder = nn.EmbeddingBag(100, 32)
        prompt_ids = torch.randint(0, 100, (5, 6))      # 'a photo of a {label}', five labels
        with torch.no_grad():
            text_features = F.normalize(text_encoder(prompt_ids), dim=-1)
        logit_scale = torch.tensor(100.0)
        images = torch.rand(4, 3, 8, 8).to(device)
        """,
        cell="""
        with torch.no_grad():
            img = F.normalize(image_encoder(images), dim=-1)
            probs = (logit_scale * img @ text_features.T).softmax(-1)
        """,
        culprit="text_features",
        target="openreg:0",
        checks=("probs",),
        fake=False,
        standin=True,
    ),
    Case(
        id="hyperbolic-prototypes-left-off-the-model",
        url="https://github.com/geoopt/geoopt/issues/81",
        classes=(6,),
        setup=OPENREG
        + """
        import geoopt
        ball = geoopt.PoincareBall(c=1.0)
        encoder = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 2)).to(device)
        protos = geoopt.ManifoldParameter(ball.expmap0(torch.randn(4, 2) * 0.3), manifold=ball)
        opt = geoopt.optim.RiemannianAdam([*encoder.parameters(), protos], lr=1e-2)
        x = torch.randn(6, 10).to(device)
        y = torch.randint(0, 4, (6,)).to(device)
        """,
        cell="""
        z = ball.expmap0(encoder(x))
        logits = -ball.dist(z[:, None], protos[None])
        loss = F.cross_entropy(logits, y)
        """,
        culprit="protos",
        target="openreg:0",
        checks=("logits", "loss"),
        fake=False,
        standin=True,
        needs=("geoopt",),
    ),
    # -- 7. parts kept on the CPU on purpose ----------------------------------------------
    Case(
        id="simulator-tensordict-fed-to-a-device-policy",
        url="https://github.com/pytorch/rl/pull/765",
        classes=(7,),
        setup=TENSORDICT
        + """
        from tensordict import TensorDict
        from tensordict.nn import TensorDictModule
        policy = TensorDictModule(nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2)),
                                  in_keys=['observation'], out_keys=['logits']).to(device)

        def env_reset(n=8):                           # the simulator runs on the CPU
            return TensorDict({'observation': torch.randn(n, 4), 'step_count': torch.zeros(n, 1)},
                              batch_size=[n])
        """,
        cell="""
        td = env_reset()
        td = policy(td)
        action = td['logits'].argmax(-1)
        """,
        culprit="td",
        target="openreg:0",
        checks=("action",),
        fake=False,
        standin=True,
        xfail="issue 27 mechanism 7: the whole TensorDict is on the CPU and is named by one of its entries (`td['step_count']`), as the first corpus names a batch (`inputs['input_ids']`), where this author wants `td`; the fix runs",
        needs=("tensordict",),
    ),
    Case(
        id="embedding-table-kept-in-host-memory",
        url="https://github.com/BlinkDL/RWKV-LM/issues/249",
        classes=(7,),
        setup=OPENREG
        + """
        from linear_attention_transformer import LinearAttentionTransformer
        vocab = 5000
        token_emb = nn.Embedding(vocab, 16).to('cpu')      # the big table stays in host memory
        body = LinearAttentionTransformer(dim=16, heads=2, depth=1, max_seq_len=32).to(device)
        classifier = nn.Linear(16, 3).to(device)
        ids = torch.randint(0, vocab, (2, 10))             # token ids stay with the table
        """,
        cell="""
        x = token_emb(ids)
        h = body(x)
        logits = classifier(h.mean(1))
        """,
        culprit="x",
        target="openreg:0",
        checks=("h", "logits"),
        fake=False,
        standin=True,
        needs=("linear_attention_transformer",),
    ),
    # -- 8. a discarded .to() -------------------------------------------------------------
    Case(
        id="tensordict-to-discarded-before-the-forward",
        url="https://github.com/pytorch/tensordict/issues/1104",
        classes=(8,),
        setup=TENSORDICT
        + """
        from tensordict import TensorDict
        regressor = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
        batch = TensorDict({'x': torch.randn(8, 5), 'y': torch.randn(8, 1)}, batch_size=[8])
        """,
        cell="""
        batch.to(device)
        pred = regressor(batch['x'])
        loss = F.mse_loss(pred, batch['y'])
        """,
        culprit="batch",
        target="openreg:0",
        checks=("pred", "loss"),
        fix_has="batch = batch.to(device)",
        fake=False,
        standin=True,
        xfail="issue 27 mechanism 8: named by an entry (`batch['x']`), as the first corpus names a batch, where this author wants `batch`; the dropped line is mended and the fix runs",
        needs=("tensordict",),
    ),
    Case(
        id="timestep-sampler-moves-dropped-in-a-train-step",
        url="https://github.com/huggingface/accelerate/issues/2251",
        classes=(8,),
        setup=OPENREG
        + """
        class UniformSampler:
            def __init__(self, num_timesteps):
                self.w = torch.ones(num_timesteps)

            def sample(self, batch_size):
                t = torch.multinomial(self.w, batch_size, replacement=True)
                return t, torch.ones(batch_size)

        class Denoiser(nn.Module):
            def __init__(self, T, d=8):
                super().__init__()
                self.t_embed = nn.Embedding(T, d)
                self.net = nn.Sequential(nn.Linear(2 * d, 32), nn.SiLU(), nn.Linear(32, d))

            def forward(self, x, t):
                return self.net(torch.cat([x, self.t_embed(t)], -1))

        T = 50
        alphas_bar = torch.cumprod(1 - torch.linspace(1e-4, 0.02, T), 0).to(device)
        sampler = UniformSampler(T)
        denoiser = Denoiser(T).to(device)
        opt = torch.optim.Adam(denoiser.parameters(), lr=1e-3)

        def train_step(x0):
            t, weights = sampler.sample(x0.shape[0])
            t.to(x0.device)
            weights.to(x0.device)
            noise = torch.randn_like(x0)
            a = alphas_bar[t].unsqueeze(-1)
            xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
            loss = (weights * ((denoiser(xt, t) - noise) ** 2).mean(-1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        data = torch.randn(24, 8).to(device)
        """,
        cell="""
        for step in range(3):
            loss = train_step(data[step * 8:(step + 1) * 8])
        """,
        culprit="t in train_step",
        target="openreg:0",
        checks=("loss",),
        fix_has="t = t.to(x0.device)",
        fake=False,
        standin=True,
    ),
    Case(
        id="predictor-to-method-drops-the-prior",
        url="https://github.com/NeuroTorch/NeuroTorch/pull/132",
        classes=(8, 3),
        setup=OPENREG
        + """
        class Predictor:
            def __init__(self, model, class_prior):
                self.model = model
                self.log_prior = class_prior.log()

            def to(self, device):
                self.model.to(device)
                self.log_prior.to(device)
                return self

            def predict(self, x):
                with torch.no_grad():
                    return (self.model(x).log_softmax(-1) - self.log_prior).argmax(-1)

        predictor = Predictor(nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3)),
                              torch.tensor([0.7, 0.2, 0.1])).to(device)
        x = torch.randn(5, 6).to(device)
        """,
        cell="labels = predictor.predict(x)\n",
        culprit="predictor.log_prior",
        target="openreg:0",
        checks=("labels",),
        fix_has="self.log_prior = self.log_prior.to(device)",
        fake=False,
        standin=True,
    ),
    Case(
        id="batch-generator-drops-its-moves",
        url="https://github.com/neu-vi/ezflow/issues/46",
        classes=(8,),
        setup=OPENREG
        + """
        classifier = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2)).to(device)
        loader = DataLoader(TensorDataset(torch.randn(12, 4), torch.randint(0, 2, (12,))),
                            batch_size=4)

        def batches(loader, device):
            for xb, yb in loader:
                xb.to(device)
                yb.to(device)
                yield xb, yb
        """,
        cell="""
        correct = 0
        with torch.no_grad():
            for xb, yb in batches(loader, device):
                correct += (classifier(xb).argmax(1) == yb).sum()
        """,
        culprit="xb in batches",
        target="openreg:0",
        checks=("correct",),
        fix_has="xb = xb.to(device)",
        fake=False,
        standin=True,
        xfail="issue 27 mechanism 8: the dropped moves are in a generator function whose frame is suspended (not on the traceback): named `xb`, the generator's lines are not mended (the fix runs)",
    ),
]
